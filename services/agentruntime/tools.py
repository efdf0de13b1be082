"""Tools the model can call. The catalog is fixed when the runtime starts, so
the tool schemas a model sees never change with modes (stable KV cache)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agenthost.sessionlog.v1 import events_pb2

from .questions import QuestionBroker


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    output: str = ""
    error: str = ""


@dataclass(frozen=True)
class ToolContext:
    session_id: str
    questions: QuestionBroker


ToolRun = Callable[[ToolContext, dict[str, Any]], Awaitable[ToolOutcome]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolRun

    def schema(self) -> events_pb2.ToolSchema:
        return events_pb2.ToolSchema(
            name=self.name,
            description=self.description,
            parameters_json=json.dumps(self.parameters, sort_keys=True),
        )


class ToolCatalog:
    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._schemas = [tool.schema() for tool in tools]

    def schemas(self) -> list[events_pb2.ToolSchema]:
        return list(self._schemas)

    async def run(self, context: ToolContext, name: str, args_json: str) -> ToolOutcome:
        tool = self._tools.get(name)
        if tool is None:
            return ToolOutcome(ok=False, error=f"unknown tool {name!r}")
        try:
            args = json.loads(args_json or "{}")
        except json.JSONDecodeError as error:
            return ToolOutcome(ok=False, error=f"arguments are not JSON: {error}")
        if not isinstance(args, dict):
            return ToolOutcome(ok=False, error="arguments must be a JSON object")
        return await tool.run(context, args)
