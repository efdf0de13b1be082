"""Plan-mode config: exactly {section: non-empty text}, checked at load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.planmode.config import (
    DEFAULT_SECTION,
    PlanModeConfig,
    PlanModeConfigError,
    config_from_mapping,
    load_config,
)


def test_the_default_section_asks_for_a_plan_through_exit_plan_mode() -> None:
    assert PlanModeConfig().section == (
        "You are in plan mode. Explore and design before presenting the complete plan "
        "through exit_plan_mode."
    )
    assert PlanModeConfig().section == DEFAULT_SECTION


def test_a_section_is_kept_verbatim() -> None:
    text = "Plan first.\nPresent the plan through exit_plan_mode.\n"
    assert config_from_mapping({"section": text}).section == text


def test_an_unknown_key_fails_and_names_the_key() -> None:
    with pytest.raises(PlanModeConfigError, match="'modes'"):
        config_from_mapping({"section": "Plan.", "modes": ["plan"]})


@pytest.mark.parametrize("section", ["", "   \n"])
def test_an_empty_section_fails(section: str) -> None:
    with pytest.raises(PlanModeConfigError, match="non-empty"):
        config_from_mapping({"section": section})


def test_a_missing_section_fails() -> None:
    with pytest.raises(PlanModeConfigError, match="required"):
        config_from_mapping({})


def test_a_section_that_is_not_text_fails() -> None:
    with pytest.raises(PlanModeConfigError, match="text"):
        config_from_mapping({"section": ["Plan."]})


def test_a_json_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "plan-mode.json"
    path.write_text(json.dumps({"section": "Plan carefully."}), encoding="utf-8")
    assert load_config(path) == PlanModeConfig(section="Plan carefully.")


@pytest.mark.parametrize("content", ["{not json", '["section"]'])
def test_a_file_that_is_not_a_json_object_fails_and_names_the_file(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "plan-mode.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(PlanModeConfigError, match=r"plan-mode\.json"):
        load_config(path)


def test_a_missing_file_fails_and_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(PlanModeConfigError, match=r"absent\.json"):
        load_config(tmp_path / "absent.json")
