"""The bytes of the images the model's view references.

A user/message holds its images by reference (digest, media type, size):
their bytes live in the session log's image store (agenthost_core/images.py
says what an image is). The transcript makes each an Image without bytes;
before a request is sent they are loaded here, through the log's port,
read once and kept while the view holds them, so a resumed or forked
session's model sees the images its log references as the first one did.
An image the store no longer has (its session deleted meanwhile) is left
out of the request, with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from services.common.errors import ImageNotFound
from services.sessionlog.port import SessionLogPort

from .models.base import ChatMessage, Image, UserMessage

log = logging.getLogger(__name__)


class ImageLoader:
    def __init__(self, log_port: SessionLogPort, session_id: str) -> None:
        self._log = log_port
        self._session_id = session_id
        # The bytes of the images of the view, by digest (b"": not found).
        self._kept: dict[str, bytes] = {}

    async def loaded(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """`messages` with their user images' bytes."""
        wanted = {
            image.digest
            for message in messages
            if isinstance(message, UserMessage)
            for image in message.images
            if image.digest and not image.data
        }
        if not wanted:
            self._kept.clear()
            return list(messages)
        self._kept = {digest: data for digest, data in self._kept.items() if digest in wanted}
        for digest in wanted - self._kept.keys():
            self._kept[digest] = await self._read(digest)
        return [self._filled(message) for message in messages]

    async def _read(self, digest: str) -> bytes:
        try:
            return (await self._log.read_image(self._session_id, digest)).data
        except ImageNotFound:
            log.warning(
                "image %s is not stored: left out", digest, extra={"session_id": self._session_id}
            )
            return b""

    def _filled(self, message: ChatMessage) -> ChatMessage:
        if not isinstance(message, UserMessage) or not message.images:
            return message
        images = tuple(self._image(image) for image in message.images)
        return replace(message, images=images)

    def _image(self, image: Image) -> Image:
        if image.data or not image.digest:
            return image
        return replace(image, data=self._kept.get(image.digest, b""))
