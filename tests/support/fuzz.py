"""Fuzzing any agenthost gRPC service from its descriptor.

`ServiceFuzzer` calls every method of a service with raw bytes on the wire,
so one helper sends both random valid-shaped messages (drawn field by field
from the request's descriptor) and random bytes. After each call it checks
what a client would notice:

- the answer is OK or a typed refusal, never INTERNAL, UNKNOWN or a hang;
- an INVALID_ARGUMENT carries a google.rpc.BadRequest;
- a refused call changed no stored row (`snapshot` reads the service's
  storage before and after);
- the service still answers health with SERVING.

Use: `ServiceFuzzer(descriptor, channel, Pool({...seed ids...}), snapshot=
sqlite_rows(db))`, then per drawn example `await fuzzer.check(method,
fuzzer.draw_request(data, method).SerializeToString())` (or random bytes);
`fuzzable(descriptor)` lists the methods to parametrize over. The channel
carries whatever credentials the caller wants to fuzz with (or none).

Values are drawn to reach real rows: ids and paths seen in replies (and the
ones a test seeds) are offered back to later requests, next to edge values
(int64 limits, NUL, the root, long and non-ASCII text). Client-streaming
methods are skipped; server-streaming ones are judged by their first answer.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from contextlib import closing, suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import (
    Descriptor,
    FieldDescriptor,
    MethodDescriptor,
    ServiceDescriptor,
)
from google.protobuf.message import DecodeError, Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import strategies as st

from services.common.status import field_violations

CALL_TIMEOUT_S = 10.0
# How long a stream may stay silent before the call counts as a quiet watch.
QUIET_STREAM_S = 1.0
# Nested messages deeper than this are left unset (Struct/Value recurse).
MAX_DEPTH = 3

# What a caller may be told; anything else is a bug the fuzzer reports.
TYPED = frozenset(
    {
        grpc.StatusCode.OK,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)

INT_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}
# The request field an `id` of these reply messages goes in (else the
# message's name: Workspace.id -> workspace_id).
ID_OF = {"SessionSummary": "session_id"}
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}"
TEXT = st.text(max_size=40)
ODD_TEXT = st.sampled_from(["", " ", "\0", "x\0y", "../..", "²", "é" * 3000, "x" * 5000])

Snapshot = Callable[[], Awaitable[object]]


@dataclass
class Outcome:
    code: grpc.StatusCode
    details: str
    error: grpc.aio.AioRpcError | None = None
    reply: bytes | None = None

    def describe(self) -> str:
        return f"{self.code.name}: {self.details[:500]}"


@dataclass
class Pool:
    """Values worth sending again, by the field they go in: ids and paths
    that name real things. A field with no values of its own takes any id
    (or path) known."""

    values: dict[str, list[str]] = field(default_factory=dict)
    limit: int = 32

    def add(self, name: str, value: str) -> None:
        known = self.values.setdefault(name, [])
        if value and value not in known and len(known) < self.limit:
            known.append(value)

    def for_field(self, name: str) -> list[str]:
        if self.values.get(name):
            return self.values[name]
        similar = _is_id if _is_id(name) else _is_path if _is_path(name) else None
        if similar is None:
            return []
        return [v for key, known in self.values.items() if similar(key) for v in known]


def _is_id(name: str) -> bool:
    return name == "id" or name.endswith(("_id", "_ids"))


def _is_path(name: str) -> bool:
    return name in ("path", "cwd") or name.endswith(("_path", "_paths"))


class RequestDrawer:
    """Draws messages of any descriptor, field by field, from `data`."""

    def __init__(self, data: st.DataObject, pool: Pool) -> None:
        self.data = data
        self.pool = pool
        # Picks that must not lean towards "simple" choices the way
        # hypothesis's own draws do (an edge value together with a real id).
        self.random = data.draw(st.randoms(use_true_random=False), label="picks")

    def message(self, descriptor: Descriptor, depth: int = 0) -> Message:
        message = message_factory.GetMessageClass(descriptor)()
        chosen = self._oneof_choices(descriptor)
        for fd in descriptor.fields:
            oneof = fd.containing_oneof
            if oneof is not None and not _synthetic(oneof.name, oneof.fields):
                if chosen.get(oneof.name) is not fd:
                    continue
                self._set(message, fd, depth)
            else:
                # Drawn whatever the pool holds, then maybe dropped: hypothesis
                # needs each run of an example to make the same draws, and the
                # pool grows while the test runs.
                chance = self.random.random()
                self._set(message, fd, depth)
                if not (self.pool.values.get(fd.name) or chance < 0.75):
                    message.ClearField(fd.name)  # a field with known values is always set
        return message

    def _oneof_choices(self, descriptor: Descriptor) -> dict[str, FieldDescriptor | None]:
        choices: dict[str, FieldDescriptor | None] = {}
        for oneof in descriptor.oneofs:
            if _synthetic(oneof.name, oneof.fields):
                continue
            # Mostly one of the fields: an empty oneof is one case, not the likeliest.
            options: list[FieldDescriptor | None] = [*oneof.fields, *oneof.fields, None]
            choices[oneof.name] = self.random.choice(options)
        return choices

    def _set(self, message: Message, fd: FieldDescriptor, depth: int) -> None:
        target = getattr(message, fd.name)
        kind = fd.message_type
        if kind is None:
            if fd.is_repeated:
                for _ in range(self._size(fd.name)):
                    self._assign(target.append, fd)
            else:
                self._assign(lambda value: setattr(message, fd.name, value), fd)
        elif depth >= MAX_DEPTH:
            return
        elif kind.GetOptions().map_entry:
            self._fill_map(target, kind, depth)
        elif fd.is_repeated:
            for _ in range(self._size(fd.name)):
                target.add().CopyFrom(self.message(kind, depth + 1))
        else:
            target.CopyFrom(self.message(kind, depth + 1))

    def _fill_map(self, target: Any, entry: Descriptor, depth: int) -> None:
        key_fd, value_fd = entry.fields_by_name["key"], entry.fields_by_name["value"]
        for _ in range(self._size(entry.name)):
            key = self._scalar(key_fd, key_fd.name)
            if value_fd.message_type is not None:
                target[key].CopyFrom(self.message(value_fd.message_type, depth + 1))
            else:
                self._assign(partial(target.__setitem__, key), value_fd)

    def _size(self, name: str) -> int:
        return self.data.draw(st.integers(0, 4), label=f"{name} size")

    def _assign(self, put: Callable[[Any], None], fd: FieldDescriptor) -> None:
        # e.g. an undefined value of a closed enum: no client can send it
        with suppress(ValueError):
            put(self._scalar(fd, fd.name))

    def _scalar(self, fd: FieldDescriptor, name: str) -> Any:
        cpp = fd.cpp_type
        if cpp in INT_RANGES:
            low, high = INT_RANGES[cpp]
            if self.random.random() < 0.5:
                # Overflow hides at the ends of the range.
                edges = [v for v in (high, low, high - 1, low + 1, -1, 0, 1, 2) if low <= v]
                return self.random.choice(edges)
            return self.data.draw(st.one_of(st.integers(-3, 60), st.integers(low, high)), name)
        if cpp == FieldDescriptor.CPPTYPE_BOOL:
            return self.data.draw(st.booleans(), label=name)
        if cpp in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
            floats = st.floats(width=32) if cpp == FieldDescriptor.CPPTYPE_FLOAT else st.floats()
            return self.data.draw(floats, label=name)
        if cpp == FieldDescriptor.CPPTYPE_ENUM:
            assert fd.enum_type is not None
            if self.random.random() < 0.75:
                return self.random.choice([v.number for v in fd.enum_type.values])
            return self.data.draw(st.integers(-2, 99), label=name)
        if fd.type == FieldDescriptor.TYPE_BYTES:
            return self.data.draw(st.binary(max_size=64), label=name)
        return self.data.draw(self._text(name), label=name)

    def _text(self, name: str) -> st.SearchStrategy[str]:
        known = self.pool.for_field(name)
        # Every draw made whatever the pool holds, the index in a fixed range:
        # the pool grows while the test runs, and hypothesis needs each run to
        # make the same draws.
        chance, index = self.random.random(), self.random.randrange(1024)
        # A field with values of its own wants them (account_id, session_id);
        # one that borrows others' (new_session_id) is better new, mostly.
        if known and chance < (0.6 if self.pool.values.get(name) else 0.25):
            return self._new_text(name).map(lambda _: known[index % len(known)])
        return self._new_text(name)

    def _new_text(self, name: str) -> st.SearchStrategy[str]:
        choices: list[st.SearchStrategy[str]] = [TEXT, ODD_TEXT]
        if _is_id(name):
            choices.append(st.from_regex(ID_PATTERN, fullmatch=True))
        if _is_path(name):
            choices += [
                st.sampled_from(["/", "//", "/tmp/..", "relative", "/no/such/dir", "/a\0b"]),
                st.builds(lambda s: "/" + s, TEXT),
            ]
        if name.endswith("page_token"):
            choices.append(st.sampled_from(["0", "1", "9" * 19, "9" * 40, "-1"]))
        return st.one_of(choices)


def refused_as_undecodable(outcome: Outcome) -> bool:
    """How a service refuses bytes that are not its request: INVALID_ARGUMENT
    (the shared interceptor), never UNKNOWN."""
    return bool(outcome.code == grpc.StatusCode.INVALID_ARGUMENT)


def _synthetic(name: str, fields: Sequence[FieldDescriptor]) -> bool:
    """proto3 `optional` wraps its field in a oneof of its own."""
    return len(fields) == 1 and name == "_" + fields[0].name


def harvest(message: Message, pool: Pool) -> None:
    """Add the ids and paths of a reply to the pool, under the request field
    they fit: `Workspace.id` as `workspace_id`, `session_ids` as `session_id`."""
    for fd, value in message.ListFields():
        if fd.message_type is not None:
            if not fd.message_type.GetOptions().map_entry:
                for item in value if fd.is_repeated else [value]:
                    harvest(item, pool)
        elif fd.cpp_type == FieldDescriptor.CPPTYPE_STRING and (
            _is_id(fd.name) or _is_path(fd.name)
        ):
            name = fd.name.removesuffix("s") if fd.is_repeated else fd.name
            if name == "id":
                name = ID_OF.get(message.DESCRIPTOR.name, _snake(message.DESCRIPTOR.name) + "_id")
            for item in value if fd.is_repeated else [value]:
                pool.add(name, item)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@dataclass
class ServiceFuzzer:
    """One service on `channel`, as its descriptor describes it."""

    service: ServiceDescriptor
    channel: grpc.aio.Channel
    pool: Pool = field(default_factory=Pool)
    # The service's stored state; compared around every refused call.
    snapshot: Snapshot | None = None

    def method(self, name: str) -> MethodDescriptor:
        return self.service.methods_by_name[name]

    def draw_request(self, data: st.DataObject, method: MethodDescriptor) -> Message:
        return RequestDrawer(data, self.pool).message(method.input_type)

    async def call(self, method: MethodDescriptor, payload: bytes) -> Outcome:
        """One call with `payload` as the request's bytes on the wire."""
        path = f"/{self.service.full_name}/{method.name}"
        try:
            if method.server_streaming:
                stream = self.channel.unary_stream(path)(payload, timeout=CALL_TIMEOUT_S)
                try:
                    # A watch with nothing to say yet is quiet, not failing:
                    # an error would have come at once.
                    first = await asyncio.wait_for(stream.read(), QUIET_STREAM_S)
                except TimeoutError:
                    first = grpc.aio.EOF
                finally:
                    stream.cancel()
                reply = None if first is grpc.aio.EOF else first
                return Outcome(grpc.StatusCode.OK, "", reply=reply)
            reply = await self.channel.unary_unary(path)(payload, timeout=CALL_TIMEOUT_S)
            return Outcome(grpc.StatusCode.OK, "", reply=reply)
        except grpc.aio.AioRpcError as error:
            return Outcome(error.code(), error.details() or "", error)

    async def check(self, method: MethodDescriptor, payload: bytes) -> Outcome:
        """Call, then assert every property in the module docstring; bytes
        that do not decode as the request must be refused as such."""
        before = await self.snapshot() if self.snapshot is not None else None
        outcome = await self.call(method, payload)
        where = f"{method.name}({payload[:200]!r})"
        request_type = message_factory.GetMessageClass(method.input_type)
        try:
            request_type.FromString(payload)
        except DecodeError:
            assert refused_as_undecodable(outcome), f"{where} answered {outcome.describe()}"
        else:
            assert outcome.code in TYPED, f"{where} answered {outcome.describe()}"
            if outcome.error is not None and outcome.code == grpc.StatusCode.INVALID_ARGUMENT:
                assert field_violations(outcome.error), (
                    f"{where}: INVALID_ARGUMENT without a BadRequest: {outcome.describe()}"
                )
        if outcome.code != grpc.StatusCode.OK and self.snapshot is not None:
            assert await self.snapshot() == before, f"{where} was refused but wrote rows"
        if outcome.reply is not None:
            reply_type = message_factory.GetMessageClass(method.output_type)
            harvest(reply_type.FromString(outcome.reply), self.pool)
        await self.assert_healthy()
        return outcome

    async def assert_healthy(self) -> None:
        reply = await health_pb2_grpc.HealthStub(self.channel).Check(
            health_pb2.HealthCheckRequest(service=self.service.full_name), timeout=CALL_TIMEOUT_S
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def fuzzable(service: ServiceDescriptor) -> list[str]:
    """The names of the methods a ServiceFuzzer calls (not client-streaming)."""
    return [m.name for m in service.methods if not m.client_streaming]


def sqlite_rows(*paths: Path) -> Snapshot:
    """A snapshot of every row of every table of these SQLite files
    (AUTOINCREMENT bookkeeping aside), read on a connection of its own."""

    def read() -> dict[str, list[str]]:
        rows: dict[str, list[str]] = {}
        for path in paths:
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                tables = [
                    t
                    for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                    if t != "sqlite_sequence"
                ]
                for table in tables:
                    found = db.execute(f'SELECT * FROM "{table}"').fetchall()
                    rows[f"{path.name}:{table}"] = sorted(repr(r) for r in found)
        return rows

    async def snapshot() -> object:
        return await asyncio.to_thread(read)

    return snapshot
