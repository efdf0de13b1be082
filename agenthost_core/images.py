"""Images sent with prompts: what counts as one, by its bytes, and the limits.

One implementation, shared by the services (the session log checks what it
stores, the runtime what a prompt sends) and the Python clients (the CLI
tells an image file from a text file the same way). An image is known by
its first bytes (its magic number), never by a file name or by what its
sender says it is: PNG, JPEG, GIF or WebP, at most MAX_IMAGE_BYTES each, at
most MAX_IMAGES a prompt (Claude Code's bounds). It is stored
content-addressed: its digest is "sha256:<hex>" of its bytes.
"""

from __future__ import annotations

import hashlib

PNG = "image/png"
JPEG = "image/jpeg"
GIF = "image/gif"
WEBP = "image/webp"
MEDIA_TYPES = (PNG, JPEG, GIF, WEBP)
# What one image may weigh, how many one prompt may send, and what they
# may weigh together (a prompt is one call, within the services' 16 MiB
# messages: more images are sent by digest once stored, or in the next
# message).
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_IMAGES = 20
MAX_PROMPT_IMAGE_BYTES = 15 * 1024 * 1024
# The bytes `media_type_of` looks at.
SNIFF_BYTES = 12


def media_type_of(data: bytes) -> str | None:
    """The media type the bytes start like (None: none of the four)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if data.startswith(b"\xff\xd8\xff"):
        return JPEG
    if data.startswith((b"GIF87a", b"GIF89a")):
        return GIF
    if len(data) >= SNIFF_BYTES and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return WEBP
    return None


def refusal(data: bytes) -> str:
    """Why `data` is no image a prompt may send ("" when it is one)."""
    if not data:
        return "it is empty"
    if media_type_of(data) is None:
        return "its bytes are not a PNG, JPEG, GIF or WebP image"
    if len(data) > MAX_IMAGE_BYTES:
        most = size_text(MAX_IMAGE_BYTES)
        return (
            f"it has {len(data):,} bytes, over the {MAX_IMAGE_BYTES:,} ({most}) an image may have"
        )
    return ""


def too_much(sizes: list[int]) -> str:
    """Why images of these sizes are too many or too heavy for one prompt
    ("" when they fit)."""
    if len(sizes) > MAX_IMAGES:
        return f"a prompt sends at most {MAX_IMAGES} images"
    if sum(sizes) > MAX_PROMPT_IMAGE_BYTES:
        most = size_text(MAX_PROMPT_IMAGE_BYTES)
        return f"the images of one prompt may have {most} together ({size_text(sum(sizes))} here)"
    return ""


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def size_text(size: int) -> str:
    """A size as people read it: 812 B, 12 KB, 3.4 MB."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{round(size / 1024)} KB"
    return f"{size / (1024 * 1024):.1f} MB"
