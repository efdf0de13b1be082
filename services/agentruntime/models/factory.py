"""Choose the model adapter from the environment.

The built-in adapter is the default; AGENTHOST_MODEL_BASE_URL selects the
OpenAI-compatible one, configured by the other AGENTHOST_MODEL_* variables
(model, key, time limits and attempts: see `OpenAICompatConfig.from_env`).
AGENTHOST_BUILTIN_SCRIPT (or `builtin_script`) scripts
the built-in adapter from a JSON file. AGENTHOST_MODEL_CONTEXT_WINDOW sets
either adapter's context window (a script's `context_window` wins).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from urllib.parse import urlsplit

from services.agentruntime.models.base import ModelAdapter
from services.agentruntime.models.builtin import BUILTIN_CONTEXT_WINDOW, BuiltinAdapter
from services.agentruntime.models.openai_compat import (
    ENV_BASE_URL,
    OpenAICompatAdapter,
    OpenAICompatConfig,
    context_window_from_env,
)

ENV_BUILTIN_SCRIPT = "AGENTHOST_BUILTIN_SCRIPT"


def adapter_from_env(
    env: Mapping[str, str] | None = None, *, builtin_script: str | Path | None = None
) -> ModelAdapter:
    env = os.environ if env is None else env
    if env.get(ENV_BASE_URL):
        return OpenAICompatAdapter(OpenAICompatConfig.from_env(env))
    window = context_window_from_env(env, BUILTIN_CONTEXT_WINDOW)
    script = builtin_script or env.get(ENV_BUILTIN_SCRIPT)
    if script:
        return BuiltinAdapter.from_script_file(script, context_window=window)
    return BuiltinAdapter(context_window=window)


async def unreachable_reason(base_url: str, timeout_s: float = 5.0) -> str | None:
    """Why the model server at `base_url` cannot be reached (None: it accepts a
    connection, and for https a TLS handshake), so that a wrong base URL shows
    when the stack starts, not when a turn fails. A connection, not a request:
    the HTTP client loads with the first turn, not with a stack that only
    started."""
    try:
        url = urlsplit(base_url)
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError as error:
        return f"not a URL ({error})"
    if url.scheme not in ("http", "https"):
        return "not an http:// or https:// URL"
    if not url.hostname:
        return "not a URL (it names no host)"
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(
                url.hostname, port, ssl=True if url.scheme == "https" else None
            )
    except TimeoutError:
        return f"no connection within {timeout_s:g} s"
    except OSError as error:  # refused, unknown host, TLS refused (ssl.SSLError)
        return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    writer.close()
    with suppress(OSError):
        await writer.wait_closed()
    return None
