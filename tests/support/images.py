"""Real images for tests: small PNG files made byte by byte (zlib, CRCs),
so a viewer opens them and every check by magic number knows them."""

from __future__ import annotations

import struct
import zlib

# Not an image by its bytes, although a file of it may be named shot.png.
NOT_AN_IMAGE = b"%PDF-1.4\n% a document, not an image\n"
# The smallest JPEG-looking start (the checks look at magic numbers only).
JPEG_HEAD = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"


def png(width: int = 4, height: int = 3, rgb: tuple[int, int, int] = (200, 30, 40)) -> bytes:
    """A `width` x `height` PNG of one colour (different colours: different digests)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = b"\x00" + bytes(rgb) * width
    pixels = zlib.compress(row * height)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def big_png(size: int) -> bytes:
    """PNG-looking bytes of `size` bytes (over a limit, say)."""
    head = png()
    return head + b"\x00" * max(size - len(head), 0)
