"""Images at the chat's prompt: `@shot.png` attaches that image, and so does
a line that is just the path of an image file (what a terminal types when
a file is dropped on it: maybe quoted, or with its spaces escaped by
backslashes). The file is read here, from the chat's folder (or the path's
own, when absolute or `~`), and sent with the prompt as an image; in the
text it becomes "[image: shot.png]", so the model reads where it was. A
file is an image by its bytes (agenthost_core/images.py), whatever its
name; one named like an image whose bytes are none is refused, unsent; an
`@path` naming any other file stays text (the agent attaches it).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from agenthost_core import images
from clients.sdk import Image
from clients.sdk.images import read_image_file

# An `@` at the start or after white space, then a path (quoted with spaces),
# as the agent reads them (services/agentruntime/capabilities/references.py).
_REFERENCE = re.compile(r'(?<!\S)@(?:"([^"\n]+)"|(\S+))')
# What may end a sentence after a path ("look at @shot.png.").
_TRAILING = ".,;:!?)]}'\"`"


@dataclass
class Attached:
    """A prompt's text with its images taken out, and the images."""

    text: str
    images: list[Image] = field(default_factory=list)

    def notes(self) -> list[str]:
        """What the chat says of each image: "[image: shot.png, 12 KB]"."""
        return [f"[image: {i.name}, {images.size_text(len(i.data))}]" for i in self.images]


# Names that say a file is an image: one whose bytes are none is refused
# (IMAGE_REFUSED) rather than sent as text.
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})


def image_file(written: str, folder: Path) -> Path | None:
    """The image file a path names (relative to `folder`): one whose bytes
    are an image, or whose name says it is one (then refused when sent if
    its bytes say otherwise); None when it names none."""
    if not written:
        return None
    path = Path(written).expanduser()
    path = path if path.is_absolute() else folder / path
    try:
        if not path.is_file():
            return None
        with path.open("rb") as handle:
            head = handle.read(images.SNIFF_BYTES)
    except OSError:
        return None
    is_image = images.media_type_of(head) is not None
    return path if is_image or path.suffix.lower() in IMAGE_SUFFIXES else None


def dropped_path(line: str) -> str:
    """The path a line holds if it is just one path, as a terminal types a
    dropped file: quoted, or its spaces escaped ("" when it is not one)."""
    stripped = line.strip()
    if not stripped:
        return ""
    try:
        words = shlex.split(stripped)
    except ValueError:
        return ""
    return words[0] if len(words) == 1 else ""


def dropped_image(line: str, folder: Path) -> bool:
    """Whether a line is the path of an image file (not a slash command)."""
    return image_file(dropped_path(line), folder) is not None


def attach_images(text: str, folder: Path) -> Attached:
    """Take the prompt's image paths out of `text` (their files read; one
    that cannot be sent raises the SDK's IMAGE_REFUSED error)."""
    found: dict[Path, Image] = {}

    def take(path: Path) -> str:
        image = found.get(path)
        if image is None:
            image = found[path] = read_image_file(path)
        return f"[image: {image.name}]"

    lines = []
    for line in text.split("\n"):
        dropped = image_file(dropped_path(line), folder)
        lines.append(take(dropped) if dropped is not None else line)

    def reference(match: re.Match[str]) -> str:
        word = match.group(1) or match.group(2)
        for written in dict.fromkeys((word, word.rstrip(_TRAILING))):
            path = image_file(written, folder)
            if path is not None:
                return take(path) + word[len(written) :]
        return match.group(0)

    replaced = _REFERENCE.sub(reference, "\n".join(lines))
    return Attached(replaced, list(found.values()))
