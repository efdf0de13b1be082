"""The models file: parsed, validated with errors naming the file and key,
found where the docs say, and turned into one adapter per model."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.models.catalog import (
    ENV_MODELS_FILE,
    ModelCatalog,
    ModelInUse,
    ModelsFileError,
    Prices,
    ProviderSpec,
    catalog_from_env,
    cost_of,
    load_catalog,
    model_in_use,
    parse_models,
    price,
)
from services.agentruntime.models.openai_compat import OpenAICompatAdapter
from services.common.errors import UnknownModel

REPO = Path(__file__).resolve().parents[4]

TWO_MODELS = """
default = "slow"

[providers.acme]
base_url = "http://127.0.0.1:9/v1"
api_key_env = "ACME_KEY"

[models.fast]
provider = "acme"
id = "acme-fast-1"
context_window = 64000
max_output_tokens = 4000

[models.slow]
provider = "acme"
context_window = 200000
max_output_tokens = 16000
[models.slow.prices]
input = 3
cached_input = 0.3
output = 15

[models.builtin]
provider = "builtin"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return path


def test_a_models_file_lists_its_models_with_their_limits_and_prices(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, TWO_MODELS), {})
    assert catalog.names() == ["fast", "slow", "builtin"]
    assert catalog.default.name == "slow"
    fast = catalog.get("fast")
    assert (fast.model_id, fast.context_window, fast.max_output_tokens) == (
        "acme-fast-1",
        64000,
        4000,
    )
    assert fast.provider == ProviderSpec(
        "acme", base_url="http://127.0.0.1:9/v1", api_key_env="ACME_KEY"
    )
    assert fast.prices is None
    slow = catalog.get("slow")
    assert slow.model_id == "slow"  # the name, when no id is given
    assert slow.prices == Prices(input=3.0, output=15.0, cached_input=0.3)
    assert catalog.get("builtin").provider.kind == "builtin"
    assert catalog.get("") == slow


def test_an_unknown_model_is_a_typed_error_naming_the_known_ones(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, TWO_MODELS), {})
    with pytest.raises(UnknownModel) as raised:
        catalog.get("gpt-9")
    assert raised.value.reason == "UNKNOWN_MODEL"
    assert "fast, slow, builtin" in str(raised.value)
    # A session whose model left the file falls back to the default.
    assert catalog.resolve("gpt-9").name == "slow"


def test_the_example_models_file_loads() -> None:
    catalog = load_catalog(REPO / "examples" / "models.toml", {})
    assert "builtin" in catalog.names()
    assert catalog.default.name == "deepseek-chat"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[models.a]\nprovider = 'nobody'\ncontext_window = 10", "models.a.provider"),
        ("[models.a]\nprovider = 'builtin'\ncontext_window = 0", "models.a.context_window"),
        (
            "[providers.p]\nbase_url = 'http://x'\n[models.a]\nprovider = 'p'",
            "models.a.context_window",
        ),
        (
            "[models.a]\nprovider = 'builtin'\ncontext_window = 10\nmax_output_tokens = 10",
            "models.a.max_output_tokens",
        ),
        ("[providers.p]\nbase_url = 'ftp://x'\n", "providers.p.base_url"),
        ("[providers.p]\nkind = 'magic'\n", "providers.p.kind"),
        ("[models.a]\nprovider = 'builtin'\ncolour = 'red'", "models.a.colour"),
        (
            "[models.a]\nprovider = 'builtin'\n[models.a.prices]\ninput = 1",
            "models.a.prices.output",
        ),
        (
            "[models.a]\nprovider = 'builtin'\n[models.a.prices]\ninput = -1\noutput = 1",
            "models.a.prices.input",
        ),
        ("[models.a]\nprovider = 'builtin'\nimages = 'yes'", "models.a.images"),
        ("default = 'b'\n[models.a]\nprovider = 'builtin'", "default"),
        ("title = 'x'", "title"),
        ("default = 'a'", "models"),
    ],
)
def test_a_bad_models_file_names_the_file_and_the_key(
    tmp_path: Path, text: str, where: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ModelsFileError) as raised:
        load_catalog(path, {})
    assert str(raised.value).startswith(f"{path}: {where}:")


def test_a_models_file_that_is_not_toml_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, "[models\n")
    with pytest.raises(ModelsFileError, match="is not valid TOML"):
        load_catalog(path, {})
    with pytest.raises(ModelsFileError, match="cannot be read"):
        load_catalog(tmp_path / "missing.toml", {})


def test_the_file_is_the_one_named_else_the_data_folders(tmp_path: Path) -> None:
    named = tmp_path / "named.toml"
    named.write_text("[models.named]\nprovider = 'builtin'\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "models.toml").write_text("[models.in-data]\nprovider = 'builtin'\n")
    assert catalog_from_env({ENV_MODELS_FILE: str(named)}, data).names() == ["named"]
    assert catalog_from_env({}, data).names() == ["in-data"]
    assert catalog_from_env({}, data, named).names() == ["named"]


async def test_without_a_file_the_environment_chooses_one_model(tmp_path: Path) -> None:
    builtin = catalog_from_env({}, tmp_path)
    assert builtin.names() == ["builtin"]
    assert isinstance(builtin.adapter(builtin.default), BuiltinAdapter)
    env = {"AGENTHOST_MODEL_BASE_URL": "http://127.0.0.1:9/v1", "AGENTHOST_MODEL": "deepseek-chat"}
    remote = catalog_from_env(env, tmp_path)
    assert remote.names() == ["deepseek-chat"]
    assert remote.default.model_id == "deepseek-chat"
    await remote.aclose()


async def test_adapters_are_made_once_per_model_on_first_use_and_closed(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, TWO_MODELS), {"ACME_KEY": "sk-acme"})
    fast = catalog.adapter(catalog.get("fast"))
    assert isinstance(fast, OpenAICompatAdapter)
    assert fast.model == "acme-fast-1"
    assert fast.config.api_key == "sk-acme"
    assert fast.config.base_url == "http://127.0.0.1:9/v1"
    assert catalog.adapter(catalog.get("fast")) is fast
    assert catalog.adapter(catalog.get("slow")) is not fast
    await catalog.aclose()


async def test_a_model_takes_images_when_its_entry_says_so(tmp_path: Path) -> None:
    seeing = TWO_MODELS.replace(
        "max_output_tokens = 4000", "max_output_tokens = 4000\nimages = true"
    )
    # The environment's image flag is the env model's, not the file's models'.
    catalog = load_catalog(write(tmp_path, seeing), {"AGENTHOST_MODEL_IMAGES": "1"})
    assert catalog.get("fast").images and not catalog.get("slow").images
    fast, slow = catalog.adapter(catalog.get("fast")), catalog.adapter(catalog.get("slow"))
    assert isinstance(fast, OpenAICompatAdapter) and isinstance(slow, OpenAICompatAdapter)
    assert fast.config.images and not slow.config.images
    await catalog.aclose()
    env = {
        "AGENTHOST_MODEL_BASE_URL": "http://127.0.0.1:9/v1",
        "AGENTHOST_MODEL": "seer",
        "AGENTHOST_MODEL_IMAGES": "1",
    }
    remote = catalog_from_env(env, tmp_path / "no-models-file")
    assert remote.default.images
    await remote.aclose()


def test_one_adapter_is_a_catalog_of_one() -> None:
    adapter = BuiltinAdapter()
    catalog = ModelCatalog.of_adapter(adapter)
    assert catalog.names() == ["builtin"]
    assert catalog.adapter(catalog.default) is adapter


def test_cost_is_priced_per_million_with_cached_input_at_its_price(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, TWO_MODELS), {})
    slow = catalog.get("slow")
    # 1M prompt tokens of which 400k cached, 100k completion tokens.
    cost = cost_of(slow, 1_000_000, 100_000, 400_000)
    assert cost == pytest.approx(600_000 * 3 / 1e6 + 400_000 * 0.3 / 1e6 + 100_000 * 15 / 1e6)
    assert cost_of(catalog.get("fast"), 1000, 1000) is None
    assert cost_of(replace(slow, prices=Prices(2, 4)), 10, 5, 10) == (
        pytest.approx((10 * 2 + 5 * 4) / 1e6)
    )


def test_the_readmes_models_file_loads() -> None:
    readme = (REPO / "README.md").read_text()
    block = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    default, specs = parse_models(tomllib.loads(block), "README.md")
    assert default == "deepseek-chat"
    [spec] = specs
    assert (spec.model_id, spec.context_window) == ("deepseek-chat", 128000)
    assert spec.prices == Prices(input=0.27, output=1.10, cached_input=0.07)


def test_a_usage_record_is_priced_only_when_its_model_has_prices(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, TWO_MODELS), {})
    used = ev.ModelUsage(prompt_tokens=1_000_000, completion_tokens=0, cached_prompt_tokens=0)
    assert price(catalog.get("slow"), used).cost == 3.0
    unpriced = ev.ModelUsage(prompt_tokens=1000, completion_tokens=10)
    assert not price(catalog.get("fast"), unpriced).HasField("cost")


def test_model_in_use_names_the_model_and_its_server() -> None:
    chosen = model_in_use({"AGENTHOST_MODEL_BASE_URL": "http://h/v1", "AGENTHOST_MODEL": "m"})
    assert chosen == ModelInUse("m", "http://h/v1")
    assert model_in_use({"AGENTHOST_MODEL_BASE_URL": "http://h/v1"}).name.startswith("?")
    assert model_in_use({"AGENTHOST_BUILTIN_SCRIPT": "s.json"}).server.endswith("s.json")
    assert model_in_use({}) == ModelInUse(
        "built-in", "none: it echoes (set AGENTHOST_MODEL_BASE_URL and AGENTHOST_MODEL)"
    )


def test_model_in_use_names_the_models_files_default_and_its_providers_server(
    tmp_path: Path,
) -> None:
    path = tmp_path / "models.toml"
    path.write_text(
        'default = "fast"\n'
        '[providers.local]\nbase_url = "http://127.0.0.1:8000/v1"\n'
        '[models.fast]\nprovider = "local"\nid = "qwen"\n'
        "context_window = 32000\nmax_output_tokens = 4096\n",
        encoding="utf-8",
    )
    env = {"AGENTHOST_MODELS_FILE": str(path), "AGENTHOST_MODEL_BASE_URL": "http://other/v1"}

    assert model_in_use(env) == ModelInUse("fast", "http://127.0.0.1:8000/v1")
    path.write_text("default = 3\n", encoding="utf-8")
    assert model_in_use(env).name == "?"
