"""Requests checked against their protovalidate rules, quickly.

protovalidate's engine reads a google.protobuf message in place, one call
into Python per field of every message it walks, so an `Event` (a oneof of
two dozen bodies) costs about 40 µs and an `Append` of 100 events about
4 ms: more than the append itself. Read as a protobuf-py message (Buf's
protobuf runtime, which protovalidate is built on), the same request is
checked by the same engine against the same rules 3-4x faster, parse
included. The type is made once per message from the descriptors the
generated code registered, so it always matches what the servicer receives;
each proto file's protobuf-py descriptor is made once per process, whichever
services' files import it. A request that protobuf-py cannot read (it should
read every one upb decoded) is checked in place as before: no rule is ever
skipped.
"""

from __future__ import annotations

import functools
from typing import Any

import protobuf
import protovalidate
from buf.validate import validate_pb2
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import Message

# How protobuf-py's generated modules make each file's descriptor from its
# imports' (the one way to make a file's without remaking them; a private
# module, so pinned with the protobuf-py version in constraints.txt).
from protobuf._codegen import file_desc

_validator = protovalidate.Validator()
# Requests this small are checked in place: reading them as protobuf-py costs
# about what it saves, and their proto file's types (tens of ms to make, once)
# then wait for a request worth reading so, not for the start-up's own calls.
IN_PLACE_BYTES = 256


@functools.cache
def _file(file: FileDescriptor | Any) -> protobuf.DescFile:
    """A proto file's protobuf-py descriptor, made once, after its imports':
    the services' files share theirs (descriptor.proto, validate.proto, the
    events), so a start-up whose services each call another makes those once."""
    dependencies = [_file(dependency) for dependency in file.dependencies]
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    return file_desc(proto.SerializeToString(), dependencies, {})


@functools.cache
def _registry(file: FileDescriptor | Any) -> protobuf.Registry:
    """The protobuf-py types of a proto file and of what it imports, made
    once per file (the requests of one service share it)."""
    return protobuf.Registry(_file(file))


def _protobuf_py_type(descriptor: Descriptor | Any) -> type[protobuf.Message]:
    found = _registry(descriptor.file).message(descriptor.full_name)
    if found is None:  # the file declares it
        raise LookupError(descriptor.full_name)
    return found.type


class RequestRules:
    """The protovalidate violations of requests, as `(field path, reason)`."""

    def __init__(self, in_place_bytes: int = IN_PLACE_BYTES) -> None:
        self._types: dict[str, type[protobuf.Message]] = {}
        self._in_place_bytes = in_place_bytes

    def violations(self, request: Message) -> list[tuple[str, str]]:
        return described(self._collect(request))

    def _collect(self, request: Message) -> list[protovalidate.Violation]:
        if request.ByteSize() <= self._in_place_bytes:
            return _validator.collect_violations(request)
        name = request.DESCRIPTOR.full_name
        kind = self._types.get(name)
        if kind is None:
            kind = self._types[name] = _protobuf_py_type(request.DESCRIPTOR)
        try:
            readable = kind.from_binary(request.SerializeToString())
        except Exception:
            return _validator.collect_violations(request)
        return _validator.collect_violations(readable)


def described(violations: list[protovalidate.Violation]) -> list[tuple[str, str]]:
    """`(field path, reason)` of each violation, read as our generated type."""
    found = [validate_pb2.Violation.FromString(v.proto.to_binary()) for v in violations]
    return [(field_path(v), f"{v.rule_id}: {v.message}") for v in found]


def field_path(violation: validate_pb2.Violation) -> str:
    """`a.b[2].c` from a violation's field path (empty for message-level rules)."""
    parts: list[str] = []
    for element in violation.field.elements:
        part = element.field_name
        if element.HasField("index"):
            part += f"[{element.index}]"
        elif element.HasField("string_key"):
            part += f"[{element.string_key!r}]"
        parts.append(part)
    return ".".join(parts)


_rules = RequestRules()


def violations_of(request: Message) -> list[tuple[str, str]]:
    """What `request` breaks of its rules (empty: it keeps them all)."""
    return _rules.violations(request)
