"""Images sent with a prompt: bytes, a file's path, or an `Image` (bytes,
or the digest of one the session holds already, with a name to show).

The gateway checks an image by its bytes (PNG, JPEG, GIF, WebP; at most
5 MiB each, 20 a prompt: agenthost_core/images.py) and refuses the prompt
(InvalidArgumentError, reason IMAGE_REFUSED) otherwise, or when the
session's model takes no images (FailedPreconditionError, reason
MODEL_TAKES_NO_IMAGES). A file is checked here by the same rules before
it is read whole, so a large file is refused without being sent.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core import images

from .errors import IMAGE_REFUSED, InvalidArgumentError


@dataclass(frozen=True)
class Image:
    """An image to send: its bytes, or the digest ("sha256:<hex>") of one
    the session holds; `name` is what clients show (a file's name)."""

    data: bytes = b""
    digest: str = ""
    name: str = ""
    media_type: str = ""

    def to_proto(self) -> ev.ImageInput:
        """As the Prompt call carries it."""
        given = ev.ImageInput(name=self.name, media_type=self.media_type)
        if self.digest:
            given.digest = self.digest
        else:
            given.data = self.data
        return given


ImageLike = Image | bytes | bytearray | memoryview | str | os.PathLike[str]


def image_of(item: ImageLike) -> Image:
    """An image as a prompt sends it (a path is read here)."""
    if isinstance(item, Image):
        return item
    if isinstance(item, bytes | bytearray | memoryview):
        return Image(bytes(item))
    return read_image_file(Path(item))


def read_image_file(path: Path) -> Image:
    """A file's bytes as an image, checked (IMAGE_REFUSED) before it is
    read whole: a file over the limit is never read."""
    with path.open("rb") as handle:
        data = handle.read(images.MAX_IMAGE_BYTES + 1)
    why = images.refusal(data)
    if why:
        raise InvalidArgumentError(
            f"cannot send image {path.name}: {why}",
            code="INVALID_ARGUMENT",
            reason=IMAGE_REFUSED,
            metadata={"image": path.name, "why": why},
        )
    return Image(data, name=path.name)


def image_inputs(items: Sequence[ImageLike]) -> list[ev.ImageInput]:
    """A prompt's images as the Prompt call carries them (paths read); too
    many or too heavy together are refused here (IMAGE_REFUSED), as the
    gateway would, rather than by the transport's message bound."""
    given = [image_of(item).to_proto() for item in items]
    why = images.too_much([len(g.data) for g in given])
    if why:
        raise InvalidArgumentError(
            f"cannot send image #{len(given)}: {why}",
            code="INVALID_ARGUMENT",
            reason=IMAGE_REFUSED,
            metadata={"image": f"#{len(given)}", "why": why},
        )
    return given
