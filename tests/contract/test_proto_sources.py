"""The .proto sources parse with every common toolchain, not only protoc
and buf: protobuf.js (what Node's @grpc/proto-loader loads them with)
rejects an extension key inside an aggregate option value ("illegal name
'['"), so such options are written as option paths instead:
`(buf.validate.field).map.keys.string.(agenthost.common.v1.id) = true`."""

from __future__ import annotations

import re

from tests.support.hosts import REPO

# `[some.extension]: value` at the start of a line inside an option's braces.
EXTENSION_KEY_IN_AGGREGATE = re.compile(r"^\s*\[[\w.]+\]\s*:", re.MULTILINE)


def test_no_option_value_names_an_extension_inside_braces() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{text.count(chr(10), 0, match.start()) + 1}"
        for path in sorted((REPO / "proto").rglob("*.proto"))
        for text in [path.read_text()]
        for match in EXTENSION_KEY_IN_AGGREGATE.finditer(text)
    ]
    assert not offenders, offenders
