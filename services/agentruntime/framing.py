"""Text from outside the conversation (a repository's file, a file a prompt
attached, an editor's text) as the model is sent it: inside an element
whose tags the text itself can never produce, so a file cannot close its
frame and pass what follows as the user's or the runtime's words."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache


@cache
def _tag_pattern(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<(/?)({re.escape(tag)})", re.IGNORECASE)


def attribute(value: str) -> str:
    """An attribute value as it is written between double quotes."""
    return value.replace("&", "&amp;").replace('"', "&quot;")


def element(tag: str, attributes: Mapping[str, str], text: str) -> str:
    """`text` in a `tag` element; an opening or closing `tag` inside it is
    escaped (its `<` written `&lt;`)."""
    safe = _tag_pattern(tag).sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)
    shown = "".join(f' {name}="{attribute(value)}"' for name, value in attributes.items())
    return f"<{tag}{shown}>\n{safe}\n</{tag}>"
