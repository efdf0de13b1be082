"""The agent runtime: loads agents from their logs and routes inputs,
answers and settings to them; holds the live feed of what they stream."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import PermissionRule, SettingsFold
from agenthost_core.locations import config_dir as default_config_dir
from services.common.config import seconds_from_env
from services.common.errors import LeaseLost, NotFound, SessionOwnedElsewhere
from services.common.tasks import spawn
from services.sessionlog.port import SessionLogPort

from . import confinement
from .agent import Agent, AgentStatus, PromptMode
from .capabilities import default_capabilities, references
from .capability import Capability, Command, CommandResult, Release, Resource
from .compaction import CompactionPolicy
from .defaults import SessionDefaults, apply_defaults
from .leases import DEFAULT_LEASE_S, SessionLeases
from .live import LiveDelta, LiveFeed, frame_from_env
from .mcp import McpServers
from .models.base import ModelAdapter
from .models.catalog import ModelCatalog, ModelSpec
from .neighbours import Neighbours
from .plan_tools import exit_plan_mode_tool
from .ports import PlanModePort, WorkspaceMembersPort
from .tools import Tool, ToolCatalog
from .workspace_catalog import workspace_tools

BASE_SECTION_ID = "agenthost:base"
# Running sessions listed per call while a starting runtime recovers them.
RECOVERY_PAGE = 500
# Pauses before asking an unreachable session log again at start-up.
RECOVERY_RETRY_S = (0.2, 5.0)
# How long past another owner's lease expiry a takeover is tried.
TAKEOVER_MARGIN_S = 0.05
# An agent nobody used for this long (no call, no turn) is unloaded: its lease
# released, its state dropped from memory, reloaded from the log on the next
# call. Without it every session ever opened stays in memory and leased here.
ENV_IDLE_S = "AGENTHOST_AGENT_IDLE_S"
DEFAULT_IDLE_S = 300.0
# The idle check runs every half idle time, within these bounds.
SWEEP_S = (0.01, 30.0)

log = logging.getLogger("agenthost.runtime")
T = TypeVar("T")


def idle_s_from_env(env: Mapping[str, str]) -> float:
    """AGENTHOST_AGENT_IDLE_S: how long an idle agent stays loaded."""
    return seconds_from_env(env, ENV_IDLE_S, DEFAULT_IDLE_S, 86_400)


class CommandNotFound(NotFound):
    REASON = "COMMAND_NOT_FOUND"

    def __init__(self, name: str) -> None:
        super().__init__(self.REASON, f"no command /{name}", command=name)


@dataclass(frozen=True)
class CommandInfo:
    name: str
    description: str
    usage: str


COMPACT_COMMAND = CommandInfo(
    "compact",
    "Summarise the conversation so far so the model sees less of it; "
    "optionally say what the summary should focus on.",
    "/compact [focus]",
)
PLAN_COMMAND = CommandInfo(
    "plan",
    "Enter plan mode, optionally with a message; `/plan off` leaves it.",
    "/plan [message] | /plan off",
)


PERMISSIONS_COMMAND = CommandInfo(
    "permissions",
    "List the permission rules that apply here; `/permissions revoke RULE_ID` revokes one.",
    "/permissions | /permissions revoke RULE_ID",
)


def base_section(cwd: str) -> ev.PromptSection:
    return ev.PromptSection(
        id=BASE_SECTION_ID,
        order=0,
        text=(
            f"You are a coding agent working in {cwd}. Answer the user's requests; use the "
            "tools you are given when they help."
        ),
    )


class AgentRuntime:
    def __init__(
        self,
        log: SessionLogPort,
        model: ModelAdapter | ModelCatalog,
        plan: PlanModePort | None = None,
        extra_tools: list[Tool] | None = None,
        lease_s: float = DEFAULT_LEASE_S,
        compaction: CompactionPolicy | None = None,
        hidden: Sequence[Path] = (),
        workspaces: WorkspaceMembersPort | None = None,
        mcp: McpServers | None = None,
        defaults: SessionDefaults | None = None,
        idle_s: float = DEFAULT_IDLE_S,
        on_unload: Callable[[str], None] | None = None,
        capabilities: Sequence[Capability] | None = None,
        config_dir: Path | None = None,
        data_dir: Path | None = None,
    ) -> None:
        self._log = log
        # What every session gets beyond the core (capabilities/), and where
        # the user's own files for them live.
        self._config_dir = config_dir or default_config_dir()
        if capabilities is None:
            capabilities = default_capabilities(
                self._config_dir, data_dir, children=self, images=(log, self._model_images)
            )
        self._capabilities = list(capabilities)
        self._compaction = compaction or CompactionPolicy.from_env()
        # The MCP servers of the sessions' folders (None: none configured anywhere).
        self._mcp = mcp
        # Where blank sessions' default settings come from (None: the built-in ones).
        self._defaults = defaults or SessionDefaults()
        # The configured models; one adapter stands for a catalog of one.
        self.models = model if isinstance(model, ModelCatalog) else ModelCatalog.of_adapter(model)
        # What confined commands must not see: `hidden` (the stack's data and
        # secrets) and the other sessions' folders; and which sessions'
        # workspace rules apply (the workspace service's members).
        self.neighbours = Neighbours(log, hidden, workspaces)
        self._plan = plan
        # The same catalog in every mode: plan mode steers, it never hides tools.
        plan_tools = [exit_plan_mode_tool(plan)] if plan is not None else []
        capability_tools = [tool for cap in self._capabilities for tool in cap.tools()]
        self._catalog = ToolCatalog(
            [*workspace_tools(), *plan_tools, *capability_tools, *(extra_tools or [])]
        )
        self.live = LiveFeed(frame_from_env(os.environ))
        self._agents: dict[str, Agent] = {}
        self._loading: dict[str, asyncio.Task[Agent]] = {}
        # A None ends the watch (the runtime is stopping).
        self._status_watchers: set[asyncio.Queue[AgentStatus | None]] = set()
        self._recovery: asyncio.Task[None] | None = None
        # A session's agent runs here only while this replica holds its lease.
        self.leases = SessionLeases(log, self._drop, lease_s)
        # Sessions owned elsewhere that this replica would take over should
        # their owner's lease run out with a turn open.
        self._watchers: dict[str, asyncio.Task[None]] = {}
        # Idle unloading: when each loaded agent was last used, the calls on
        # it under way, the unloads not finished (a load waits for them).
        self.idle_s = idle_s
        self._on_unload = on_unload
        self._last_used: dict[str, float] = {}
        self._calls: dict[str, int] = {}
        self._unloading: dict[str, asyncio.Task[None]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    # -- agents ----------------------------------------------------------------

    async def resume(self, session_id: str) -> Agent:
        """The live agent of a session; concurrent callers share one load."""
        agent = self._agents.get(session_id)
        if agent is not None:
            self._touch(session_id)
            return agent
        loading = self._loading.get(session_id)
        if loading is None:
            loading = spawn(self._load(session_id), name=f"load-{session_id}")
            self._loading[session_id] = loading
            loading.add_done_callback(lambda _: self._loading.pop(session_id, None))
        try:
            return await asyncio.shield(loading)
        except SessionOwnedElsewhere as refused:
            self._watch_owner(session_id, refused.expires_at_us)
            raise

    async def _load(self, session_id: str) -> Agent:
        """Take the session's lease first (SESSION_OWNED_ELSEWHERE when another
        replica holds it live), so that even closing a turn a dead owner
        left open is written under our token."""
        unloading = self._unloading.get(session_id)
        if unloading is not None:  # its lease is being released: take it after
            await asyncio.wait([unloading])
        summary = await self._log.get_session(session_id)
        token = await self.leases.acquire(session_id)
        agent = Agent(
            session_id,
            summary.cwd,
            log=self._log,
            models=self.models,
            plan=self._plan,
            catalog=self._catalog,
            live=self.live,
            base_sections=[base_section(summary.cwd)],
            on_status=self._publish,
            lease_token=token,
            on_lease_lost=self.leases.lost,
            compaction=self._compaction,
            neighbours=self.neighbours,
            mcp=self._mcp,
            capabilities=self._capabilities,
            config_dir=self._config_dir,
        )
        try:
            await agent.load()
            await apply_defaults(self._defaults, agent, lambda name: name in self.models.names())
        except BaseException:
            await self.leases.release(session_id)
            raise
        await self._settle(agent)
        self._agents[session_id] = agent
        self._touch(session_id)
        if self._sweeper is None:
            self._sweeper = spawn(self._unload_idle_agents(), name="runtime-idle-unload")
        return agent

    async def _settle(self, agent: Agent) -> None:
        """The capabilities settle what the log shows running that runs
        nowhere now (a job of a runtime that died); one that cannot yet
        (the log away) tries again at the session's next load."""
        for capability in self._capabilities:
            try:
                await capability.loaded(agent)
            except Exception as error:
                log.warning(
                    "%s could not settle %s: %s",
                    capability.name,
                    agent.session_id,
                    error,
                    extra={"session_id": agent.session_id},
                )

    async def _release(self, session_id: str, why: Release) -> int:
        """Ask every capability to release the session; how many of its
        processes they stopped."""
        stopped = 0
        for capability in self._capabilities:
            try:
                stopped += await capability.release(session_id, why)
            except Exception as error:
                log.warning(
                    "%s could not release %s: %s",
                    capability.name,
                    session_id,
                    error,
                    extra={"session_id": session_id},
                )
        return stopped

    def _held(self, session_id: str) -> bool:
        """Whether a capability runs something of the session here."""
        return any(capability.holds(session_id) for capability in self._capabilities)

    async def stop_processes(self, session_id: str) -> tuple[int, int]:
        """Stop the session's jobs and terminals, each recorded as closed
        (its session is archived or deleted): how many, and the last seq."""

        async def stop(agent: Agent) -> tuple[int, int]:
            stopped = await self._release(session_id, Release.CLOSED)
            await agent.catch_up()
            return stopped, agent.state.last_seq

        return await self._on_agent(session_id, stop)

    def _watch_owner(self, session_id: str, expires_at_us: int) -> None:
        """A session turned away here gets a watcher: should its owner die
        with a turn open (its lease then runs out unrenewed), this replica
        takes the session over and closes the turn as interrupted, without
        waiting for a client to come back for it."""
        if session_id not in self._watchers:
            watcher = spawn(self._take_over(session_id, expires_at_us), name=f"watch-{session_id}")
            self._watchers[session_id] = watcher
            watcher.add_done_callback(lambda _: self._watchers.pop(session_id, None))

    async def _take_over(self, session_id: str, expires_at_us: int) -> None:
        """Try again as the owner's lease runs out, while the log shows a turn
        open (a live owner renews, and then we look again a lease later)."""
        while True:
            # Waiting for a lease to run out, not synchronisation.
            await asyncio.sleep(self._until(expires_at_us))
            try:
                if not (await self._log.get_session(session_id)).running:
                    return  # nothing left open to close: the next call loads it
                await self.resume(session_id)
                return
            except SessionOwnedElsewhere as refused:
                expires_at_us = refused.expires_at_us
            except Exception as error:
                log.warning(
                    "could not take %s over: %s",
                    session_id,
                    error,
                    extra={"session_id": session_id},
                )
                return

    def _until(self, expires_at_us: int) -> float:
        """Seconds until a lease expires (by our clock, bounded by one lease:
        the log's clock may differ), and a margin past it."""
        left = (expires_at_us - time.time_ns() // 1000) / 1_000_000
        return min(max(left, 0.0), self.leases.lease_s) + TAKEOVER_MARGIN_S

    def _drop(self, session_id: str) -> None:
        """The session's lease went to another replica: its agent stops here
        at once, writing nothing (the log would refuse it), and the next call
        for the session loads it afresh (or hears where it runs)."""
        agent = self._agents.pop(session_id, None)
        self._last_used.pop(session_id, None)
        if agent is not None:
            spawn(agent.close(), name=f"drop-{session_id}")
            spawn(self._release(session_id, Release.DROPPED), name=f"release-{session_id}")

    # -- idle agents -------------------------------------------------------------

    def _touch(self, session_id: str) -> None:
        self._last_used[session_id] = time.monotonic()

    async def _unload_idle_agents(self) -> None:
        low, high = SWEEP_S
        while True:
            await asyncio.sleep(min(max(self.idle_s / 2, low), high))  # a period, not sync
            now = time.monotonic()
            idle = [s for s, agent in self._agents.items() if self._is_idle(s, agent, now)]
            await asyncio.gather(*(self._unload(session_id) for session_id in idle))

    def _is_idle(self, session_id: str, agent: Agent, now: float) -> bool:
        """Unused for `idle_s`, and nothing to go on with: no turn running
        or open (one waiting for an answer among them), no input queued, no
        call on it under way."""
        return (
            now - self._last_used.get(session_id, now) >= self.idle_s
            and not agent.running
            and not agent.state.turn.open
            and not agent.state.turn.inputs
            and not self._calls.get(session_id)
            and not self._held(session_id)
        )

    async def _unload(self, session_id: str) -> None:
        """Forget the agent at once (the next call loads it afresh from the
        log, after this), then stop it and give its lease up."""
        agent = self._agents.pop(session_id)
        self._last_used.pop(session_id, None)
        unloading = spawn(self._close_and_release(session_id, agent), name=f"unload-{session_id}")
        self._unloading[session_id] = unloading
        try:
            await asyncio.wait([unloading])
        finally:
            if self._unloading.get(session_id) is unloading:
                del self._unloading[session_id]

    async def _close_and_release(self, session_id: str, agent: Agent) -> None:
        await agent.close()
        await self._release(session_id, Release.UNLOADED)
        await self.leases.release(session_id)
        log.info("idle agent unloaded", extra={"session_id": session_id})
        if self._on_unload is not None:
            self._on_unload(session_id)

    async def close(self) -> None:
        """Stop every agent and give their leases up; turns left open are
        picked up from the log by the runtime that loads them next (see
        recover), which need not wait for the leases to expire."""
        stopping = [
            *self._watchers.values(),
            *(task for task in (self._recovery, self._sweeper) if task is not None),
        ]
        for task in stopping:
            task.cancel()
        await asyncio.gather(*stopping, return_exceptions=True)
        # Jobs and terminals stop first, recorded while the leases are held.
        await asyncio.gather(*(self._release(s, Release.STOPPED) for s in self._agents))
        await asyncio.gather(*(agent.close() for agent in self._agents.values()))
        await confinement.settled()  # the cgroups of the commands just stopped
        await self.leases.release_all()
        if self._mcp is not None:
            await self._mcp.close()
        # Watches end now, so shutdown need not wait out its grace for them.
        for queue in self._status_watchers:
            queue.put_nowait(None)
        self.live.end_watchers()

    async def start_recovery(self) -> None:
        self._recovery = spawn(self._recover_every_lease(), name="runtime-recovery")

    async def _recover_every_lease(self) -> None:
        """Recover at start, then once a lease: a replica may die with a
        turn open in a session no call ever brought here, and only a look
        at the log shows it (its lease then lapses unrenewed). At start the
        capabilities load the sessions a runtime left jobs running in."""
        for capability in self._capabilities:
            try:
                await capability.recover(self.resume)
            except Exception as error:
                log.warning("%s could not recover its sessions: %s", capability.name, error)
        while True:
            await self.recover()
            await asyncio.sleep(self.leases.lease_s)  # a period, not synchronisation

    async def recover(self) -> None:
        """Load every session whose log shows an open turn, without waiting
        for a client: a runtime that stopped or died left them running, and
        loading ends each such turn as interrupted, or resumes it when it
        waits for an answer (agent.load). A session live elsewhere is
        watched (_watch_owner): taken over should its owner's lease lapse."""
        for session_id in await self._running_sessions():
            if session_id in self._agents or session_id in self._watchers:
                continue
            try:
                await self.resume(session_id)
            except SessionOwnedElsewhere:
                pass  # its owner runs it, or we take it over when its lease lapses
            except Exception as error:  # one broken session must not stop the others
                log.warning(
                    "could not recover %s: %s", session_id, error, extra={"session_id": session_id}
                )

    async def _running_sessions(self) -> list[str]:
        """Listed whole before any is loaded: a load ends turns, which would
        shift the pages of a listing still under way."""
        delay, max_delay = RECOVERY_RETRY_S
        while True:
            try:
                running, token = [], ""
                while True:
                    page, token = await self._log.list_sessions(
                        RECOVERY_PAGE, token, running_only=True
                    )
                    running += [summary.id for summary in page]
                    if not token:
                        return running
            except Exception as error:
                log.warning("cannot list the running sessions yet: %s", error)
            await asyncio.sleep(delay)  # a pause before asking again, not synchronisation
            delay = min(delay * 2, max_delay)

    def _model_images(self, name: str) -> tuple[str, bool]:
        """The model a session's setting names, and whether it takes images."""
        spec = self.models.resolve(name)
        return spec.name, spec.images

    # -- inputs ------------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        text: str,
        mode: PromptMode = PromptMode.SEND,
        input_id: str = "",
        resources: Sequence[Resource] = (),
        images: Sequence[ev.ImageInput] = (),
    ) -> tuple[PromptMode, AgentStatus]:
        async def take(agent: Agent) -> tuple[PromptMode, AgentStatus]:
            return await agent.prompt(text, mode, input_id, resources, images), agent.status()

        return await self._on_agent(session_id, take)

    async def list_paths(
        self, session_id: str, prefix: str, limit: int = 0
    ) -> references.PathListing:
        """The paths an `@` completes, as the session's file tools see its folder."""

        async def listing(agent: Agent) -> references.PathListing:
            part = await agent.part(references.NAME)
            if not isinstance(part, references.ReferencesPart):
                return references.PathListing((), False)
            return await part.list_paths(prefix, limit)

        return await self._on_agent(session_id, listing)

    async def cancel(self, session_id: str) -> tuple[bool, AgentStatus]:
        async def stop(agent: Agent) -> tuple[bool, AgentStatus]:
            return await agent.cancel(), agent.status()

        return await self._on_agent(session_id, stop)

    async def status(self, session_id: str) -> AgentStatus:
        return (await self.resume(session_id)).status()

    # -- commands -------------------------------------------------------------------

    async def commands(self, session_id: str) -> list[CommandInfo]:
        agent = await self.resume(session_id)
        builtin = [
            *([PLAN_COMMAND] if self._plan is not None else []),
            COMPACT_COMMAND,
            PERMISSIONS_COMMAND,
        ]
        added = [CommandInfo(c.name, c.description, c.usage) for c in await self._commands(agent)]
        return [*builtin, *added]

    async def _commands(self, agent: Agent) -> list[Command]:
        """The capabilities' commands, then the session's own (a name taken
        already is not offered twice)."""
        found = [c for cap in self._capabilities for c in cap.commands()]
        taken = {PLAN_COMMAND.name, COMPACT_COMMAND.name, PERMISSIONS_COMMAND.name}
        held = frozenset(taken | {c.name for c in found})
        found += [c for part in await agent.all_parts() for c in await part.commands(held)]
        offered = []
        for command in found:
            if command.name not in taken:
                taken.add(command.name)
                offered.append(command)
        return offered

    async def execute_command(self, session_id: str, name: str, args: str | None) -> CommandResult:
        # A call on the agent: the idle check never unloads it while a
        # command runs (a compaction, a /plan waiting for plan mode).
        return await self._on_agent(session_id, lambda agent: self._command(agent, name, args))

    async def _command(self, agent: Agent, name: str, args: str | None) -> CommandResult:
        if name == COMPACT_COMMAND.name:
            compacted = await agent.compact((args or "").strip())
            return CommandResult(compacted.ok, compacted.message, agent.status().last_seq)
        if name == PERMISSIONS_COMMAND.name:
            return await self._permissions_command(agent, (args or "").split())
        if name != PLAN_COMMAND.name or self._plan is None:
            command = next((c for c in await self._commands(agent) if c.name == name), None)
            if command is None:
                raise CommandNotFound(name)
            return await command.run(agent, args)
        outcome = await self._plan.run_plan_command(agent.session_id, args)
        if outcome.ok and outcome.steer_text:
            await agent.prompt(outcome.steer_text, PromptMode.STEER)
        last_seq = (await self._log.get_session(agent.session_id)).last_seq
        return CommandResult(outcome.ok, outcome.message, last_seq)

    # -- questions and settings ------------------------------------------------------------

    async def answer(self, session_id: str, question_id: str, answer: ev.QuestionAnswer) -> int:
        """Record the first answer of an open question (QUESTION_ANSWERED for a
        later one); the turn waiting for it goes on. Returns the answer's seq.
        A subagent's question shown in its parent is answered in the child
        first, then closed in the parent."""

        async def answered(agent: Agent) -> int:
            await agent.catch_up()
            question = agent.state.questions.find(question_id)
            if question is not None and question.child_session_id:
                await self.answer(question.child_session_id, question.child_question_id, answer)
            return await agent.answer(question_id, answer)

        return await self._on_agent(session_id, answered)

    async def update_settings(
        self,
        session_id: str,
        sandbox: str | None,
        approvals: str | None,
        model: str | None = None,
        *,
        network: bool | None = None,
    ) -> tuple[SettingsFold, int]:
        return await self._on_agent(
            session_id,
            lambda agent: agent.update_settings(sandbox, approvals, model=model, network=network),
        )

    async def list_models(self, session_id: str) -> list[ModelSpec]:
        """The configured models (the session is loaded: it runs here)."""
        await self.resume(session_id)
        return self.models.specs()

    # -- permission rules ----------------------------------------------------------------

    async def rules(self, agent: Agent) -> list[tuple[str, PermissionRule]]:
        """(holding session, rule) of every rule in force for the agent's
        session: its own, and the workspace rules of its folder's sessions."""
        found = [(agent.session_id, rule) for rule in agent.state.permissions.rules]
        for other in await self.neighbours.sharing(agent.session_id, agent.cwd_text):
            state = await self._log.load_state(other)
            found += [(other, rule) for rule in state.permissions.workspace_rules(agent.cwd_text)]
        return found

    async def _permissions_command(self, agent: Agent, words: list[str]) -> CommandResult:
        await agent.catch_up()
        rules = await self.rules(agent)
        if not words:
            lines = [f"{r.rule_id}  {r.scope:<9}  {_shown(r.grant)}" for _, r in rules]
            message = "\n".join(lines) if lines else "no permission rules"
            return CommandResult(True, message, agent.state.last_seq)
        if len(words) != 2 or words[0] != "revoke":
            return CommandResult(False, f"usage: {PERMISSIONS_COMMAND.usage}", -1)
        holder = next((sid for sid, rule in rules if rule.rule_id == words[1]), None)
        if holder is None:
            return CommandResult(False, f"no permission rule {words[1]!r} applies here", -1)
        owner = agent if holder == agent.session_id else await self.resume(holder)
        seq = await owner.revoke_rule(words[1])
        last_seq = seq if owner is agent and seq is not None else agent.state.last_seq
        return CommandResult(True, f"revoked {words[1]}", last_seq)

    async def _on_agent(self, session_id: str, work: Callable[[Agent], Awaitable[T]]) -> T:
        """`work` on the session's live agent. Deposed meanwhile (LEASE_LOST:
        the log wrote nothing, and the agent is dropped), it is asked once
        more of the agent loaded afresh, so the caller hears where the session
        runs now (SESSION_OWNED_ELSEWHERE: retry), or is served here if the
        lease came free."""
        try:
            return await self._with_agent(session_id, work)
        except LeaseLost:
            return await self._with_agent(session_id, work)

    async def _with_agent(self, session_id: str, work: Callable[[Agent], Awaitable[T]]) -> T:
        """`work` on the live agent, which stays loaded while it runs."""
        agent = await self.resume(session_id)
        self._calls[session_id] = self._calls.get(session_id, 0) + 1
        try:
            return await work(agent)
        finally:
            self._calls[session_id] -= 1
            if not self._calls[session_id]:
                del self._calls[session_id]
            self._touch(session_id)

    # -- subagents (capabilities/subagents: Children) -------------------------------------

    async def start_child(
        self, parent_id: str, header: ev.SubagentHeader, settings: ev.SessionSettings
    ) -> str:
        parent = await self.resume(parent_id)
        child_id = f"{parent_id[:80]}.sub-{uuid.uuid4().hex[:16]}"
        await self._log.create_session(child_id, parent.cwd_text)
        child = await self.resume(child_id)
        await child.record([ev.Event(subagent_header=header), ev.Event(session_settings=settings)])
        return child_id

    async def prompt_child(self, child_id: str, text: str) -> tuple[str, int]:
        input_id = f"input-{uuid.uuid4().hex}"

        async def send(agent: Agent) -> int:
            await agent.catch_up()
            after = agent.state.last_seq
            await agent.prompt(text, PromptMode.QUEUE, input_id)
            return after

        return input_id, await self._on_agent(child_id, send)

    async def cancel_child(self, child_id: str) -> None:
        await self.cancel(child_id)

    async def follow(self, child_id: str, after_seq: int) -> AsyncIterator[ev.Event]:
        async for item in self._log.subscribe(child_id, after_seq=after_seq):
            if isinstance(item, ev.Event):
                yield item

    def watch_live(self) -> AsyncIterator[LiveDelta]:
        """The text so far of everything running, then the pieces as they come."""
        return self.live.watch()

    # -- status stream ---------------------------------------------------------------

    def _publish(self, status: AgentStatus) -> None:
        if status.session_id in self._agents:  # a turn started or ended: in use
            self._touch(status.session_id)
        for queue in self._status_watchers:
            queue.put_nowait(status)

    async def watch_status(self, session_id: str | None = None) -> AsyncIterator[AgentStatus]:
        """Running/idle changes as they happen (current status first for one session)."""
        queue: asyncio.Queue[AgentStatus | None] = asyncio.Queue()
        self._status_watchers.add(queue)
        try:
            if session_id is not None:
                yield await self.status(session_id)
            while (status := await queue.get()) is not None:
                if session_id is None or status.session_id == session_id:
                    yield status
        finally:
            self._status_watchers.discard(queue)


def _shown(grant: str) -> str:
    """A rule's grant as a user reads it."""
    if grant.startswith("shell:"):
        return f"$ {grant.removeprefix('shell:')} …"
    return "every file change" if grant == "edit" else grant
