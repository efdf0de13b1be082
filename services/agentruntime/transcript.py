"""The conversation a model sees, rebuilt from the session's events.

From the latest compaction on, it is the compaction's summary and the
messages of the events after the seq the compaction covers (the log keeps
the rest; see compaction.py). A tool output above the spill limit shows as
its head and tail and a note naming its spill file (spill.py). A turn that
ended before its answer was complete leaves a marker the model sees next
time: its calls that never ran get a result saying so, and a cancelled
turn's partial answer (recorded as its assistant message) ends with a note
that the user cancelled, so the next prompt never follows the last one
with no answer between them.

A user/message's attached files (UserMessage.files: an `@path` of its text,
an editor's resources) follow its text, each framed (framing.py), a cut
one with a note of how much there is; its images (UserMessage.images)
follow them, by reference (their bytes are loaded for a request: images.py).

Context the runtime's capabilities add (context/added: a repository's
instructions, the task list) is a user-role message of its own; one
recorded while a step's calls wait for their results (a queued prompt's)
follows those results, since a provider takes nothing between a call and
its result. A
compaction starts the view with the context it carried (Compaction.context)
and its summary, then what it kept of the turn it cut (Compaction.kept: the
turn's prompt and its latest tool exchange), then what follows its cut.
The transcript also keeps what the provider counted of the last request in
the view (`counted`), for request_size.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from agenthost.sessionlog.v1 import events_pb2

from . import spill
from .compaction import summary_message
from .framing import element
from .models.base import (
    AssistantMessage,
    ChatMessage,
    Image,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from .request_size import CountedRequest

CANCELLED_MARK = "[The user cancelled this turn here; the answer above is unfinished.]"
ENDED_EARLY_MARK = "[This turn ended before the answer was complete: {reason}]"
NOT_RUN = "Not run: the turn ended before this call ran."
FILE_CUT = "[cut here: {path} has {size} bytes; read the rest with read_file]"
FOLDER_CUT = "[cut here: {path} has {size} entries; list_dir lists them all]"


@dataclass
class Entry:
    """One message of the view and the seqs of the events it was made of."""

    first_seq: int
    last_seq: int
    message: ChatMessage


@dataclass(frozen=True)
class TurnTail:
    """What a compaction in the middle of a turn may keep verbatim: the
    turn's user messages (its prompt, steered ones) and its latest tool
    exchange (the assistant message that called tools, and their results)."""

    # The seq of the turn's turn/start (-1: no turn open).
    turn_seq: int = -1
    prompts: tuple[Entry, ...] = ()
    exchange: tuple[Entry, ...] = ()


class Transcript:
    """Appended to as events are recorded; `messages()` is the model's view."""

    def __init__(self, spill_bytes: int = spill.MAX_SHOWN_BYTES) -> None:
        self._entries: list[Entry] = []
        # What the latest compaction starts the view with.
        self._head: list[ChatMessage] = []
        self._spill_bytes = spill_bytes
        # Calls of the last assistant message still waiting for a result,
        # and context recorded meanwhile, shown once they have it.
        self._waiting: list[str] = []
        self._held: list[Entry] = []
        # The seq of the open turn's turn/start (None: no turn open).
        self._turn_seq: int | None = None
        # The estimate of the last request header not yet paired with the
        # provider's count, and the last request the provider counted.
        self._sent_estimate = 0
        self.counted: CountedRequest | None = None

    def add(self, event: events_pb2.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "user_message":
            self._append(event.seq, user_message(event.user_message))
        elif kind == "context_added":
            self._add_context(event.seq, event.context_added.text)
        elif kind == "assistant_message":
            self._append(event.seq, AssistantMessage(event.assistant_message.text))
        elif kind == "tool_call":
            call = event.tool_call
            self._attach_call(event.seq, ToolCallRequest(call.call_id, call.name, call.args_json))
        elif kind == "tool_result":
            self._add_result(event.seq, event.tool_result)
        elif kind == "tool_attachment":
            self._attach_image(event.seq, event.tool_attachment)
        elif kind == "turn_start":
            self._turn_seq = event.seq
        elif kind == "turn_end":
            self._end_turn(event.seq, event.turn_end)
            self._turn_seq = None
        elif kind == "compaction":
            self._compact(event.compaction)
        elif kind == "request_header":
            self._sent_estimate = event.request_header.estimated_tokens
        elif kind == "model_usage":
            self._count(event.model_usage)

    def add_all(self, events: Iterable[events_pb2.Event]) -> None:
        for event in events:
            self.add(event)

    def messages(self) -> list[ChatMessage]:
        return [*self._head, *(entry.message for entry in self._entries)]

    def turn_tail(self) -> TurnTail:
        """The open turn's user messages and latest tool exchange (empty
        when no turn is open)."""
        if self._turn_seq is None:
            return TurnTail()
        turn = [e for e in self._entries if e.first_seq > self._turn_seq]
        prompts = tuple(e for e in turn if isinstance(e.message, UserMessage))
        called = [i for i, e in enumerate(turn) if _calls_tools(e.message)]
        if not called:
            return TurnTail(self._turn_seq, prompts)
        start = called[-1]
        results = [e for e in turn[start + 1 :] if isinstance(e.message, ToolResultMessage)]
        return TurnTail(self._turn_seq, prompts, (turn[start], *results))

    def _append(self, seq: int, message: ChatMessage) -> None:
        self._entries.append(Entry(seq, seq, message))

    def _add_context(self, seq: int, text: str) -> None:
        entry = Entry(seq, seq, UserMessage(text))
        if self._waiting:
            self._held.append(entry)
        elif (first := self._unanswered_prompts()) is not None:
            # Recorded as the turn's first request was built (instructions,
            # a notice of an undo): the model reads it before the prompts it
            # answers, so the last message it sees is the person's, and
            # the start of the view stays the same for a prompt cache.
            self._entries.insert(first, entry)
        else:
            self._entries.append(entry)

    def _unanswered_prompts(self) -> int | None:
        """Where the open turn's prompts start, while the model has not yet
        answered any of them (None: no turn open, or answered)."""
        if self._turn_seq is None:
            return None
        first = len(self._entries)
        while first > 0 and self._entries[first - 1].first_seq > self._turn_seq:
            first -= 1
        turn = self._entries[first:]
        if not turn or not all(isinstance(e.message, UserMessage) for e in turn):
            return None
        return first

    def _release_held(self) -> None:
        """The context held while calls waited, now that none waits."""
        self._entries += self._held
        self._held = []

    def _compact(self, compaction: events_pb2.Compaction) -> None:
        """The summary, then what it kept, then what follows its cut; the
        provider's count of a request before it no longer describes the view."""
        carried = [UserMessage(context.text) for context in compaction.context]
        self._head = [*carried, summary_message(compaction.summary)]
        up_to, kept = compaction.up_to_seq, compaction.kept
        self._entries = [e for e in self._entries if e.first_seq > up_to or _within(e, kept)]
        self._sent_estimate = 0
        self.counted = None

    def _count(self, usage: events_pb2.ModelUsage) -> None:
        """Pair the provider's count with the request header it answers."""
        if usage.child_session_id:
            return  # a subagent's, not this view's request
        if self._sent_estimate > 0 and not usage.estimated and usage.prompt_tokens > 0:
            self.counted = CountedRequest(self._sent_estimate, usage.prompt_tokens)
        self._sent_estimate = 0

    def _add_result(self, seq: int, result: events_pb2.ToolResult) -> None:
        content = result.output if result.ok else result.error
        shown = spill.model_view(content, result.call_id, self._spill_bytes)
        self._append(seq, ToolResultMessage(result.call_id, shown, result.ok))
        if result.call_id in self._waiting:
            self._waiting.remove(result.call_id)
        if not self._waiting:
            self._release_held()

    def _attach_image(self, seq: int, attachment: events_pb2.ToolAttachment) -> None:
        """Onto its call's result (recorded just before it)."""
        for entry in reversed(self._entries):
            message = entry.message
            if isinstance(message, ToolResultMessage) and message.call_id == attachment.call_id:
                image = Image(attachment.mime_type, attachment.data)
                entry.message = replace(message, images=(*message.images, image))
                entry.last_seq = seq
                return

    def _attach_call(self, seq: int, call: ToolCallRequest) -> None:
        self._waiting.append(call.call_id)
        last = self._entries[-1] if self._entries else None
        if last is not None and isinstance(last.message, AssistantMessage):
            message = last.message
            last.message = AssistantMessage(message.text, (*message.tool_calls, call))
            last.last_seq = seq
        else:
            self._append(seq, AssistantMessage("", (call,)))

    def _end_turn(self, seq: int, end: events_pb2.TurnEnd) -> None:
        for call_id in self._waiting:
            self._append(seq, ToolResultMessage(call_id, NOT_RUN, ok=False))
        self._waiting = []
        self._release_held()
        if end.reason == events_pb2.TURN_END_REASON_CANCELLED:
            self._mark(seq, CANCELLED_MARK)
        elif end.reason != events_pb2.TURN_END_REASON_COMPLETED:
            self._mark(seq, ENDED_EARLY_MARK.format(reason=end.error or "no reason given"))

    def _mark(self, seq: int, mark: str) -> None:
        """The marker as (the end of) the turn's last assistant message."""
        last = self._entries[-1] if self._entries else None
        message = last.message if last is not None else None
        if last is not None and isinstance(message, AssistantMessage) and not message.tool_calls:
            last.message = AssistantMessage(f"{message.text}\n\n{mark}" if message.text else mark)
            last.last_seq = seq
        else:
            self._append(seq, AssistantMessage(mark))


def user_message(message: events_pb2.UserMessage) -> UserMessage:
    """A user/message as the model reads it: its text and files, then its
    images (by reference: their bytes are loaded when a request is sent)."""
    images = tuple(Image(i.media_type, b"", i.digest) for i in message.images)
    return UserMessage(user_text(message), images)


def user_text(message: events_pb2.UserMessage) -> str:
    """A user/message as the model reads it: its text, then its files."""
    return "\n\n".join([message.text, *(attached_text(file) for file in message.files)])


def attached_text(file: events_pb2.AttachedFile) -> str:
    """One attached file as the model reads it: framed, a cut one noted."""
    folder = file.kind == events_pb2.ATTACHED_KIND_FOLDER
    text = file.text.removesuffix("\n")  # the frame's closing tag starts a line anyway
    if file.cut:
        note = FOLDER_CUT if folder else FILE_CUT
        text = f"{text}\n{note.format(path=file.path, size=file.size)}"
    attributes = {"path": file.path}
    if file.kind == events_pb2.ATTACHED_KIND_EDITOR:
        attributes["from"] = "editor"
    return element("folder" if folder else "file", attributes, text)


def _calls_tools(message: ChatMessage) -> bool:
    return isinstance(message, AssistantMessage) and bool(message.tool_calls)


def _within(entry: Entry, kept: Sequence[events_pb2.SeqRange]) -> bool:
    return any(r.from_seq <= entry.first_seq and entry.last_seq <= r.to_seq for r in kept)
