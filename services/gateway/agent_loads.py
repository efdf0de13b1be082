"""Loading a session's agent in the runtime, once per session however many
calls ask at the same time (history, prompt and a plan choice while a turn
is open share the one path)."""

from __future__ import annotations

import asyncio

from agenthost.runtime.v1 import runtime_pb2 as rt

from services.common.recent import Recent
from services.common.tasks import spawn

from .runtime_port import RuntimePort

# Sessions whose agent this gateway had the runtime load, the recent ones.
LOADED_KEPT = 10_000


class AgentLoads:
    def __init__(self, runtime: RuntimePort) -> None:
        self._runtime = runtime
        self._loading: dict[str, asyncio.Task[rt.AgentStatus]] = {}
        self._loaded: Recent[str, bool] = Recent(LOADED_KEPT)

    async def load(self, session_id: str) -> rt.AgentStatus:
        """Load a cold session's agent once, whoever asks first."""
        task = self._loading.get(session_id)
        if task is None:
            task = spawn(self._runtime.resume(session_id), name=f"resume-{session_id}")
            self._loading[session_id] = task
            task.add_done_callback(lambda _: self._loading.pop(session_id, None))
        return await asyncio.shield(task)

    def loaded(self, session_id: str) -> bool:
        """Whether this gateway had the session's agent loaded (recently)."""
        return self._loaded.recall(session_id) is not None

    async def load_for_read(self, session_id: str) -> rt.AgentStatus | None:
        """For a read: load the agent when this gateway has not loaded it yet
        (None: it has). A read needs the load only for a turn a stopped
        runtime left open, and a runtime that starts ends those itself."""
        if self.loaded(session_id):
            return None
        status = await self.load(session_id)
        self._loaded.remember(session_id, True)
        return status
