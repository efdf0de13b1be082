"""Images in prompts: what a client sends with a prompt (bytes, or the
digest of one the session holds), and an `@path` of the prompt naming an
image file (the references capability reads it), stored by the session log
content-addressed (agenthost_core/images.py checks them by their bytes,
within the limits) and referenced from the prompt's user/message (digest,
media type, size, name). The transcript sends them to the model after the
message's text (images.py loads their bytes), as image parts.

A session whose model takes no images (its models file entry has no
`images = true`) refuses a prompt with images (MODEL_TAKES_NO_IMAGES) and
records nothing, as a refused image does (IMAGE_REFUSED, IMAGE_NOT_FOUND).
"""

from __future__ import annotations

from collections.abc import Callable

from services.common.errors import ModelTakesNoImages
from services.sessionlog.port import SessionLogPort

from ..capability import Capability, Prompt, SessionPart, SessionScope

NAME = "images"

# The model a session's setting names (its name, and whether it takes images).
ModelImages = Callable[[str], tuple[str, bool]]


class ImagesPart(SessionPart):
    def __init__(self, scope: SessionScope, log: SessionLogPort, model: ModelImages) -> None:
        self._scope = scope
        self._log = log
        self._model = model

    async def on_prompt(self, prompt: Prompt) -> None:
        if not prompt.images:
            return
        name, takes_images = self._model(self._scope.state().settings.model)
        if not takes_images:
            raise ModelTakesNoImages(name)
        refs = await self._log.put_images(self._scope.session_id, prompt.images)
        known = {ref.digest for ref in prompt.message.images}
        for ref in refs:
            if ref.digest not in known:
                known.add(ref.digest)
                prompt.message.images.append(ref)


class Images(Capability):
    name = NAME

    def __init__(self, log: SessionLogPort, model: ModelImages) -> None:
        self._log = log
        self._model = model

    def session(self, scope: SessionScope) -> SessionPart:
        return ImagesPart(scope, self._log, self._model)
