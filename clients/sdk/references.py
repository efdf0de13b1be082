"""File references: what a prompt may attach besides its `@path`s (an
editor's resources), and the paths a client completes after `@`."""

from __future__ import annotations

from dataclasses import dataclass

from agenthost.runtime.v1 import runtime_pb2 as rt


@dataclass(frozen=True)
class Resource:
    """A file sent with a prompt: a link (`text` None; a file:// URI or a
    path of the session's folder, read by the agent as an `@path` is), or
    the text an editor holds of it (an embedded resource)."""

    uri: str
    text: str | None = None

    def to_proto(self) -> rt.PromptResource:
        """As the Prompt call carries it."""
        resource = rt.PromptResource(uri=self.uri)
        if self.text is not None:
            resource.text = self.text
        return resource


@dataclass(frozen=True)
class PathEntry:
    """A path `@` may complete to: relative to the session's folder (a
    folder's ends with "/")."""

    path: str
    folder: bool


@dataclass(frozen=True)
class PathList:
    """Paths of a session's folder offered after an `@` (ListPaths)."""

    entries: list[PathEntry]
    # More matched than were listed.
    truncated: bool
