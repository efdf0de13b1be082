"""Markdown files with YAML front matter, as Claude Code and others write
them (a skill's SKILL.md, a custom command's file): a first line `---`, YAML
fields, a line `---`, then the body. The YAML is read by PyYAML's safe
loader; a file without the opening line has no fields and is all body.

Reading never raises for what a file holds: a broken front matter is a
FrontMatterError whose message says what is wrong and where, which the
capabilities list as a problem of that file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml

# Larger files are refused: a prompt or a skill's instructions, not data.
MAX_FILE_BYTES = 256 * 1024
FENCE = "---"


class FrontMatterError(ValueError):
    """What is wrong with a file, in words for its author."""


@dataclass(frozen=True)
class Document:
    fields: dict[str, Any]
    body: str


def read_text(path: Path) -> tuple[str, bytes]:
    """The file's text (undecodable bytes replaced) and its bytes; raises
    FrontMatterError when it cannot be read or is too large."""
    try:
        size = os.stat(path).st_size
        if size > MAX_FILE_BYTES:
            raise FrontMatterError(f"the file is {size} bytes; at most {MAX_FILE_BYTES} are read")
        data = path.read_bytes()
    except OSError as error:
        raise FrontMatterError(f"cannot read the file: {error.strerror or error}") from None
    return data.decode("utf-8", errors="replace"), data


def parse(text: str) -> Document:
    """The front matter's fields and the body after it."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != FENCE:
        return Document({}, text)
    end = next((i for i, line in enumerate(lines[1:], 1) if line.rstrip() == FENCE), None)
    if end is None:
        raise FrontMatterError("the front matter has no closing --- line")
    # PyYAML loads with the first front matter read, not with the runtime.
    import yaml

    try:
        fields = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as error:
        raise FrontMatterError(
            f"the front matter is not valid YAML: {_yaml_problem(error)}"
        ) from None
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        raise FrontMatterError("the front matter is not a set of `name: value` fields")
    return Document(fields, "".join(lines[end + 1 :]))


def text_field(fields: dict[str, Any], name: str, *, required: bool) -> str:
    """A field that must be text ("" when absent and not required)."""
    value = fields.get(name)
    if value is None:
        if required:
            raise FrontMatterError(f"the front matter has no `{name}`")
        return ""
    if not isinstance(value, str):
        raise FrontMatterError(f"`{name}` in the front matter is not text")
    if required and not value.strip():
        raise FrontMatterError(f"`{name}` in the front matter is empty")
    return value.strip()


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's complaint in one line, its line counted in the file (the
    front matter starts on the file's second line)."""
    import yaml

    if isinstance(error, yaml.MarkedYAMLError):
        problem = error.problem or error.context or "malformed"
        mark = error.problem_mark or error.context_mark
        return problem if mark is None else f"{problem} (line {mark.line + 2} of the file)"
    return " ".join(str(error).split())
