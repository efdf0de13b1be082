"""The ACP agent: the protocol's methods over the agenthost SDK.

Bad params are refused by the library's router (pydantic validation: -32602);
agenthost's errors become JSON-RPC errors with the reason in `data`; a
gateway that is away fails the call at once (the SDK's unary deadline) while
the connection reconnects in the background."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any, TypeVar

from acp import PROTOCOL_VERSION, RequestError
from acp import schema as acp
from acp.interfaces import Client

from clients.sdk import (
    AgentBusyError,
    AgentHostClient,
    AgentHostError,
    InvalidArgumentError,
    NotFoundError,
    TransportError,
)
from clients.sdk.checkpoints import restored_from
from clients.sdk.errors import MODEL_TAKES_NO_IMAGES

from . import translate
from .session import AcpSession

log = logging.getLogger("agenthost.acp")
T = TypeVar("T")
# Codes of the JSON-RPC server-error range for agenthost's own failures.
GATEWAY_UNAVAILABLE = -32001
# The commands that put files back, and may overwrite files changed since.
RESTORING = frozenset({"undo", "redo", "rewind"})
AGENT_BUSY = -32003
# How often a prompt waiting for its turn checks that the client still lives.
WAIT_CHECK_S = 1.0
# How long a prompt waits for its turn with the gateway away before it fails.
TURN_AWAY_S = 30.0


def _version() -> str:
    try:
        return metadata.version("agenthost")
    except metadata.PackageNotFoundError:
        return "0"


def rpc_error(error: AgentHostError) -> RequestError:
    """An agenthost error as the JSON-RPC error an editor shows."""
    data = {"reason": error.reason or str(error.code)}
    if isinstance(error, TransportError):
        return RequestError(
            GATEWAY_UNAVAILABLE,
            f"the agenthost gateway is unreachable ({error.message}); reconnecting, try again",
            data,
        )
    if isinstance(error, AgentBusyError):
        return RequestError(
            AGENT_BUSY,
            "a turn is running in this session (from elsewhere); send when it ends",
            data,
        )
    if isinstance(error, InvalidArgumentError | NotFoundError):
        return RequestError(-32602, error.message, data)
    if error.reason == MODEL_TAKES_NO_IMAGES:
        # The prompt's images are what this session cannot take.
        return RequestError(-32602, error.message, data)
    return RequestError(-32603, error.message, data)


def _folder(cwd: str) -> str:
    """A folder as workspaces name it (absolute, symlinks resolved), as the
    CLI does: the editor runs beside the stack."""
    return os.path.realpath(os.path.expanduser(cwd))


async def _gateway(work: Awaitable[T]) -> T:
    try:
        return await work
    except AgentHostError as error:
        raise rpc_error(error) from None


class AgentHostAgent:
    """One editor's connection: the sessions it opened, by id."""

    def __init__(self, client: AgentHostClient) -> None:
        self.gateway = client
        self.sessions: dict[str, AcpSession] = {}
        self._editor: Client | None = None

    def on_connect(self, conn: Client) -> None:
        self._editor = conn

    @property
    def editor(self) -> Client:
        assert self._editor is not None, "on_connect comes first"
        return self._editor

    async def close(self) -> None:
        for session in list(self.sessions.values()):
            await session.close()

    # -- lifecycle -------------------------------------------------------------------------

    async def initialize(self, protocol_version: int, **_: Any) -> acp.InitializeResponse:
        return acp.InitializeResponse(
            # The one version this agent speaks (a client asking another decides).
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=acp.AgentCapabilities(
                load_session=True,
                # No images or audio; an editor's files (links, embedded
                # text) are attached to the message as `@path`s are.
                prompt_capabilities=acp.PromptCapabilities(embedded_context=True, image=True),
                session_capabilities=acp.SessionCapabilities(list=acp.SessionListCapabilities()),
            ),
            agent_info=acp.Implementation(name="agenthost", title="agenthost", version=_version()),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **_: Any) -> acp.AuthenticateResponse:
        return acp.AuthenticateResponse()

    async def new_session(self, cwd: str, **_: Any) -> acp.NewSessionResponse:
        """The cwd's workspace (added when new) and its reusable blank session,
        or a new one: what ConnectWorkspace chooses."""
        workspace = await _gateway(self.gateway.create_workspace(_folder(cwd)))
        chosen = await _gateway(self.gateway.connect_workspace(workspace.id))
        session = await self._open(chosen.session.id, workspace.path)
        session.start()
        return acp.NewSessionResponse(
            session_id=session.id, modes=session.modes(), config_options=session.config_options()
        )

    async def load_session(self, cwd: str, session_id: str, **_: Any) -> acp.LoadSessionResponse:
        """The history replayed as updates, then live."""
        known = self.sessions.get(session_id)
        if known is not None:
            await known.close()
            del self.sessions[session_id]
        session = await self._open(session_id, None)
        await _gateway(session.replay())
        session.start()
        return acp.LoadSessionResponse(
            modes=session.modes(), config_options=session.config_options()
        )

    async def _open(self, session_id: str, cwd: str | None) -> AcpSession:
        opened = self.sessions.get(session_id)
        if opened is not None:
            return opened
        live = await _gateway(self.gateway.open_session(session_id))
        folder = cwd or (live.summary.cwd if live.summary is not None else "") or "/"
        session = AcpSession(self.editor, live, folder, self.gateway)
        self.sessions[session_id] = session
        await session.load_models()
        return session

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_: Any
    ) -> acp.ListSessionsResponse:
        workspace_id: str | None = None
        if cwd is not None:
            workspaces = await _gateway(self.gateway.list_workspaces())
            matching = [w.id for w in workspaces if w.path == _folder(cwd)]
            if not matching:
                return acp.ListSessionsResponse(sessions=[])
            workspace_id = matching[0]
        page, token = await _gateway(
            self.gateway.list_sessions_page(workspace_id, page_token=cursor or "")
        )
        return acp.ListSessionsResponse(
            sessions=[
                acp.SessionInfo(
                    session_id=s.id,
                    cwd=s.cwd,
                    title=s.title or s.preview or None,
                    updated_at=s.updated_at.ToJsonString() if s.HasField("updated_at") else None,
                )
                for s in page
                if not s.blank
            ],
            next_cursor=token or None,
        )

    # -- modes -----------------------------------------------------------------------------

    def _session(self, session_id: str) -> AcpSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "not a session of this connection"}
            )
        return session

    async def set_session_mode(
        self, session_id: str, mode_id: str, **_: Any
    ) -> acp.SetSessionModeResponse:
        """Selects plan mode: committed now when idle, at the next model
        request while a turn runs; current_mode_update says when."""
        await self._select_mode(self._session(session_id), mode_id)
        return acp.SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> acp.SetSessionConfigOptionResponse:
        """The mode (as set_session_mode) or the model: recorded in the
        session's settings, used from its next model request."""
        session = self._session(session_id)
        options = {o.id for o in session.config_options()}
        if config_id not in options or not isinstance(value, str):
            raise RequestError.invalid_params({"configId": config_id, "reason": "unknown option"})
        if config_id == translate.MODEL_CONFIG_ID:
            await self._select_model(session, value)
        else:
            await self._select_mode(session, value)
        return acp.SetSessionConfigOptionResponse(config_options=session.config_options())

    async def _select_model(self, session: AcpSession, name: str) -> None:
        available = [m.name for m in session.models]
        if name not in available:
            raise RequestError.invalid_params({"value": name, "available": available})
        if name != session.model:
            await _gateway(session.choose_model(name))

    async def _select_mode(self, session: AcpSession, mode_id: str) -> None:
        available = [m.id for m in session.modes().available_modes]
        if mode_id not in available:
            raise RequestError.invalid_params({"modeId": mode_id, "available": available})
        await _gateway(session.session.set_plan(mode_id == translate.PLAN_MODE))

    # -- turns -----------------------------------------------------------------------------

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> acp.PromptResponse:
        """Sends the prompt (or runs its slash command) and answers when the
        turn it started has ended and its updates were sent."""
        session = self._session(session_id)
        parts = translate.prompt_parts(prompt)
        text = parts.text
        if not text:
            raise RequestError.invalid_params({"reason": "the prompt has no text"})
        live = session.session
        command = translate.slash_command(text, session.command_names)
        if command is None and text.startswith("/"):
            await session.refresh_commands()
            command = translate.slash_command(text, session.command_names)
        before = live.last_seq
        if command is not None:
            args = await self._confirmed(session, command.name, command.args)
            result = await _gateway(live.execute_command(command.name, args))
            if not result.ok:
                raise RequestError(-32602, result.message, {"command": command.name})
            started = await self._turn_started(session, before, result.seq)
            if started is None:
                if result.message:
                    await session.say(result.message)
                return acp.PromptResponse(stop_reason="end_turn")
            # From the command's own turn: the end of one this editor had not
            # heard of yet when it ran the command is not its end.
            after = started
        else:
            session.own_prompts.append(text)
            try:
                sent = live.prompt(text, resources=parts.resources, images=parts.images)
                after = (await _gateway(sent)).seq - 1
            except RequestError:
                session.own_prompts.remove(text)
                raise
        ended = await self._wait(session.turn_end_after(after))
        reason = translate.stop_reason(ended.end)
        if reason is None:
            raise RequestError(
                -32603, f"the turn failed: {ended.end.error}", {"reason": "TURN_ERROR"}
            )
        return acp.PromptResponse(stop_reason=reason)

    async def _confirmed(self, session: AcpSession, name: str, args: str | None) -> str | None:
        """/undo, /redo, /rewind: files changed since by someone else are put
        to the person first (a permission request): overwritten (`--force`)
        only when they allow it, else left alone."""
        words = (args or "").split()
        if name not in RESTORING or "--force" in words or "--check" in words:
            return args
        if name == "rewind" and (not words or (len(words) > 1 and words[1] == "conversation")):
            return args  # the list of turns, or the conversation only: no files
        checked = await _gateway(
            session.session.execute_command(name, " ".join([*words, "--check"]))
        )
        skipped = restored_from(checked.ok, checked.message, checked.seq, True).skipped
        if not checked.ok or not skipped:
            return args
        reply = await session.client.request_permission(
            session_id=session.id,
            tool_call=translate.overwrite_tool_call(name, skipped),
            options=translate.OVERWRITE_OPTIONS,
        )
        outcome = reply.outcome
        allowed = (
            isinstance(outcome, acp.AllowedOutcome) and outcome.option_id == translate.OVERWRITE
        )
        return " ".join([*words, "--force"]) if allowed else args

    async def _turn_started(self, session: AcpSession, before: int, upto: int) -> int | None:
        """The seq of what started a turn in the log between `before` and
        `upto` (a command such as `/plan <message>` or a custom command sends
        a message), None when nothing did; the history is awaited up to
        `upto` first."""
        live = session.session
        with contextlib.suppress(TimeoutError):
            await live.wait_until(lambda s: s.last_seq >= upto, within=self.gateway.call_timeout)
        window = (e for e in live.events if before < e.seq <= upto)
        return next((e.seq for e in window if translate.starts_turn(e)), None)

    async def _wait(self, turn_end: asyncio.Future[T]) -> T:
        """The turn's end, across reconnects (the catch-up brings it); an
        error once the SDK client gave up, or the gateway stayed away for
        TURN_AWAY_S (the turn may go on: loading the session shows it)."""
        loop = asyncio.get_running_loop()
        away_since: float | None = None
        while True:
            done, _ = await asyncio.wait([turn_end], timeout=WAIT_CHECK_S)
            if done:
                return turn_end.result()
            failure = self.gateway.failure
            if failure is not None:
                turn_end.cancel()
                raise rpc_error(failure)
            if self.gateway.connected:
                away_since = None
            elif away_since is None:
                away_since = loop.time()
            elif loop.time() - away_since > TURN_AWAY_S:
                turn_end.cancel()
                raise RequestError(
                    GATEWAY_UNAVAILABLE,
                    "lost the agenthost gateway during the turn, which may go on; "
                    "load the session again to follow it",
                    {"reason": "GATEWAY_AWAY"},
                )

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None:
            return
        try:
            await session.session.cancel()
        except AgentHostError as error:
            log.warning("session %s: cancel failed (%s)", session_id, error)


@asynccontextmanager
async def serving(client: AgentHostClient) -> AsyncIterator[Callable[[Client], AgentHostAgent]]:
    """The agent factory for one connection, closed at the end."""
    agents: list[AgentHostAgent] = []

    def make(conn: Client) -> AgentHostAgent:
        agent = AgentHostAgent(client)
        agents.append(agent)
        return agent

    try:
        yield make
    finally:
        for agent in agents:
            await agent.close()
