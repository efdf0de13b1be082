"""Front matter and argument expansion of the files users write for the
agent (skills, custom commands), as Claude Code users write them."""

from __future__ import annotations

import pytest

from services.agentruntime.capabilities.commands import expand
from services.agentruntime.capabilities.front_matter import FrontMatterError, parse


def test_front_matter_fields_and_body() -> None:
    document = parse("\ufeff---\r\nname: lint\r\ndescription: >\r\n  Runs it.\r\n---\r\nBody\r\n")
    assert document.fields == {"name": "lint", "description": "Runs it.\n"}
    assert document.body == "Body\r\n"
    assert parse("No front matter.\n---\n").fields == {}
    assert parse("---\n---\nonly a body").fields == {}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("---\nname: x\n", "no closing --- line"),
        ("---\n- a list\n---\n", "not a set of `name: value` fields"),
        ("---\nname: x\n  bad: indent\n---\n", "not valid YAML: "),
        ("---\nname: !!python/object:os.system x\n---\n", "not valid YAML"),
    ],
)
def test_a_broken_front_matter_says_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(FrontMatterError, match=problem):
        parse(text)


def test_arguments_fill_the_body() -> None:
    body = "Fix issue $1 in $2 ($10 unset); all: $ARGUMENTS"
    assert expand(body, '42 "the parser" x') == (
        'Fix issue 42 in the parser ( unset); all: 42 "the parser" x'
    )
    assert expand(body, None) == "Fix issue  in  ( unset); all:"
    # An unclosed quote: the words as typed.
    assert expand("$1|$2", "it's fine") == "it's|fine"
    # A body that names no argument gets them after it.
    assert expand("Summarise.", "the docs") == "Summarise.\n\nARGUMENTS: the docs"
    assert expand("Summarise.", "  ") == "Summarise."
