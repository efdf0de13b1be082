"""Oversized tool output: the log keeps it whole, the model sees its head and
tail and a note naming a file with the whole of it, which it can page
through with read_file (offset and limit in lines).

The view is a pure function of the output, the call id and the limit, so a
restarted runtime shows the model the very same text; the file is written
once, when the result is recorded, under the session's folder.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from .models.base import BYTES_PER_TOKEN

log = logging.getLogger("agenthost.runtime")

# Where spilled outputs go, relative to the session's folder.
SPILL_FOLDER = ".agenthost/spill"
# An output above this many bytes is spilled...
MAX_SHOWN_BYTES = 16 * 1024
# ...or above this share of the model's context window, if that is smaller.
MAX_WINDOW_SHARE = 0.25


def spill_limit(context_window: int) -> int:
    """The most bytes of one tool output the model sees whole."""
    return min(MAX_SHOWN_BYTES, int(context_window * BYTES_PER_TOKEN * MAX_WINDOW_SHARE))


def spill_path(call_id: str) -> str:
    """The spill file of a call, relative to the session's folder."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", call_id)[:120] or "call"
    return f"{SPILL_FOLDER}/{safe}.txt"


def is_oversized(output: str, limit: int) -> bool:
    return len(output.encode()) > limit


def model_view(output: str, call_id: str, limit: int) -> str:
    """`output` itself when within `limit` bytes, else its head and tail
    (about a third of the limit each) around a note naming the spill file."""
    if not is_oversized(output, limit):
        return output
    lines = output.count("\n") + 1
    part = limit // 3
    head = output.encode()[:part].decode(errors="ignore")
    tail = output.encode()[-part:].decode(errors="ignore")
    note = (
        f"\n\n[… output cut: {len(output.encode())} bytes, {lines} lines in all. The whole output "
        f"is in {spill_path(call_id)}; read it with read_file page by page (offset, limit).]\n\n"
    )
    return head + note + tail


def write_spill(cwd: Path, call_id: str, output: str) -> None:
    """Write the whole output where the note says (a failure is logged: the
    log still holds the output, and the model still sees head and tail)."""
    target = cwd / spill_path(call_id)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        ignore = target.parent / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# tool outputs agenthost spilled for its model\n*\n")
        target.write_text(output, encoding="utf-8")
    except OSError as error:
        log.warning("could not spill a tool output to %s: %s", target, error)
