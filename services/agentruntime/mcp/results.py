"""What the model is told of an MCP tool's result: its text, a line for each
image, audio clip or resource it returned, bounded in size, and its images as
attachments (sent to models that take images); an error result is the
call's error."""

from __future__ import annotations

import base64
import json

import mcp_types as types

from ..tools import Attachment, ToolDisplay, ToolOutcome

# The most of a result the model is shown (the log bounds a result at 1 MiB).
MAX_OUTPUT_CHARS = 262144
# Images recorded with a result (tool/attachment), each at most this size.
MAX_IMAGES = 4
MAX_IMAGE_BYTES = 1048576


def outcome_of(result: types.CallToolResult, label: str) -> ToolOutcome:
    """`label` names the call in the line clients show (e.g. "everything/echo")."""
    parts = [_text_of(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = _bounded("\n".join(parts))
    if result.is_error:
        return ToolOutcome(ok=False, error=text[:65536] or "the tool reported an error")
    summary = f"{label}: {len(text)} characters"
    images = [a for a in map(_attachment, result.content) if a is not None][:MAX_IMAGES]
    return ToolOutcome(
        ok=True, output=text, display=ToolDisplay(summary=summary), attachments=tuple(images)
    )


def _attachment(block: types.ContentBlock) -> Attachment | None:
    if not isinstance(block, types.ImageContent):
        return None
    try:
        data = base64.b64decode(block.data, validate=True)
    except ValueError:
        return None
    return Attachment(block.mime_type, data) if len(data) <= MAX_IMAGE_BYTES else None


def _text_of(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        # Every model reads this line; images also go as attachments.
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        return f"[resource {resource.uri}, binary, not shown]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.uri}: {block.name}]"
    return f"[{type(block).__name__}, not shown]"


def _bounded(text: str) -> str:
    if len(text) <= MAX_OUTPUT_CHARS:
        return text
    cut = len(text) - MAX_OUTPUT_CHARS
    return f"{text[:MAX_OUTPUT_CHARS]}\n[{cut} more characters not shown]"
