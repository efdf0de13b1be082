"""What the model is told of an MCP tool's result: its text, a line for each
image, audio clip or resource it returned, bounded in size; an error result
is the call's error."""

from __future__ import annotations

import json

import mcp_types as types

from ..tools import ToolDisplay, ToolOutcome

# The most of a result the model is shown (the log bounds a result at 1 MiB).
MAX_OUTPUT_CHARS = 262144


def outcome_of(result: types.CallToolResult, label: str) -> ToolOutcome:
    """`label` names the call in the line clients show (e.g. "everything/echo")."""
    parts = [_text_of(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = _bounded("\n".join(parts))
    if result.is_error:
        return ToolOutcome(ok=False, error=text[:65536] or "the tool reported an error")
    summary = f"{label}: {len(text)} characters"
    return ToolOutcome(ok=True, output=text, display=ToolDisplay(summary=summary))


def _text_of(block: types.ContentBlock) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        # The model adapters take text only: the model hears what was returned.
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes, not shown]"
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
