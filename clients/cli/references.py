"""`@path` completion at the chat's prompt: after an `@`, Tab offers the
session folder's paths that start with what was typed, as the agent's file
tools see the folder (the gateway's ListPaths), so what completes is what
the agent may attach."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Iterable

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from clients.sdk import AgentHostError, Session

# The `@path` being typed, up to the cursor (`@"` opens a path with spaces).
TYPED_REFERENCE = re.compile(r'(?<!\S)@("?)([^\s"]*)$')
LISTED = 50


def typed_reference(before_cursor: str) -> tuple[str, str] | None:
    """(what follows `@`, the opening quote or "") when the cursor is in an
    `@path`; None otherwise."""
    match = TYPED_REFERENCE.search(before_cursor)
    return None if match is None else (match.group(2), match.group(1))


def completion_text(path: str, quote: str) -> str:
    """A path as it is written after `@`: quoted when it has spaces."""
    return f'"{path}"' if quote or " " in path else path


class PathCompleter(Completer):
    def __init__(self, session: Session) -> None:
        self.session = session

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterable[Completion]:
        return ()  # asked of the async variant only (the paths come from the gateway)

    async def get_completions_async(
        self, document: Document, event: CompleteEvent
    ) -> AsyncGenerator[Completion, None]:
        typed = typed_reference(document.text_before_cursor)
        if typed is None or not event.completion_requested:
            return  # Tab asks: a call to the gateway at every key would be too many
        prefix, quote = typed
        try:
            listed = await self.session.list_paths(prefix, LISTED)
        except AgentHostError:
            return  # no completion rather than an error at the prompt
        replaced = -(len(prefix) + len(quote))
        for entry in listed.entries:
            yield Completion(
                completion_text(entry.path, quote),
                start_position=replaced,
                display=entry.path,
            )
