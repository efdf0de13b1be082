"""Small projection units for the tests, and event builders."""

from __future__ import annotations

import json

from agenthost.sessionlog.v1 import events_pb2

from services.projection.unit import View

Event = events_pb2.Event


def user(text: str = "hi") -> Event:
    return Event(user_message=events_pb2.UserMessage(text=text))


def assistant(text: str = "hello") -> Event:
    return Event(assistant_message=events_pb2.AssistantMessage(text=text))


def title(text: str) -> Event:
    return Event(session_title=events_pb2.SessionTitle(title=text))


def turn_start() -> Event:
    return Event(turn_start=events_pb2.TurnStart(turn_id="t"))


class MessageCounter:
    """Counts user and assistant messages."""

    key = "messages"
    state_version = 1

    def init(self) -> int:
        return 0

    def apply(self, state: int, event: Event) -> int:
        if event.WhichOneof("body") in ("user_message", "assistant_message"):
            return state + 1
        return state

    def view(self, state: int) -> View:
        return {"count": state}

    def dump(self, state: int) -> bytes:
        return str(state).encode()

    def load(self, data: bytes) -> int:
        return int(data)


class UserMessageCounter(MessageCounter):
    """The `messages` key with another meaning: only the user's messages count."""

    state_version = 2

    def apply(self, state: int, event: Event) -> int:
        return state + 1 if event.HasField("user_message") else state


class TitleUnit:
    """The session title. The state also counts how often a title was set, so
    re-setting the same title changes the state but not the view. `applied`
    counts apply calls, to see which events a unit was fed."""

    key = "title"
    state_version = 1

    def __init__(self) -> None:
        self.applied = 0

    def init(self) -> tuple[str | None, int]:
        return (None, 0)

    def apply(self, state: tuple[str | None, int], event: Event) -> tuple[str | None, int]:
        self.applied += 1
        if not event.HasField("session_title"):
            return state
        return (event.session_title.title, state[1] + 1)

    def view(self, state: tuple[str | None, int]) -> View:
        return state[0]

    def dump(self, state: tuple[str | None, int]) -> bytes:
        return json.dumps(list(state)).encode()

    def load(self, data: bytes) -> tuple[str | None, int]:
        name, times = json.loads(data)
        return (name, int(times))


class UserTexts:
    """The user's messages as a nested view: {"texts": [{"text": ...}, ...]}."""

    key = "texts"
    state_version = 1
    kinds = frozenset({"user_message"})

    def init(self) -> tuple[str, ...]:
        return ()

    def apply(self, state: tuple[str, ...], event: Event) -> tuple[str, ...]:
        return (*state, event.user_message.text)

    def view(self, state: tuple[str, ...]) -> View:
        return {"texts": [{"text": text} for text in state]}

    def dump(self, state: tuple[str, ...]) -> bytes:
        return json.dumps(list(state)).encode()

    def load(self, data: bytes) -> tuple[str, ...]:
        return tuple(json.loads(data))
