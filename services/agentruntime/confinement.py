"""Operating-system confinement of the commands the agent runs (bubblewrap).

The sandbox setting used to bind the file tools only: a command ran as the
runtime's user and could change anything that user could. Now every command
of a confined sandbox runs inside ``bwrap``:

* ``read-only``: the whole file system is mounted read-only, the session's
  folder too; ``workspace-write``: the session's folder is writable, the rest
  read-only. Both get a private, empty ``/tmp`` (a compiler's scratch space;
  it vanishes with the command), a fresh ``/dev`` and ``/proc``.
* Hidden in both (an empty read-only folder or an empty file mounted over
  them): the stack's data directory, the files its settings name (tokens, keys), and the
  other sessions' folders. The runtime's secrets are not in the command's
  environment (shell.shell_environment), and the new PID namespace hides the
  runtime's ``/proc/<pid>/environ``. In a container whose ``/proc`` is
  masked (docker-compose 1.29 cannot unmask it) the sandbox gets the
  container's ``/proc`` read-only instead: the runtime's ``/proc/<pid>``
  files stay closed to its commands all the same (the kernel's ptrace check
  refuses a process of a child user namespace without capabilities, and the
  runtime is non-dumpable besides, ``make_non_dumpable``).
* Namespaces: user, PID, IPC, UTS, cgroup, and network unless the session
  turned the network on. All capabilities are dropped (``--cap-drop ALL``),
  so even a runtime running as root confines its commands.
* Processes: at most ``max_processes`` per command. RLIMIT_NPROC is counted
  per user namespace, so the limit is set inside the sandbox (``prlimit``);
  the kernel exempts root from it, so a root runtime puts each command in a
  pids cgroup of its own instead (cgroup v1 ``pids`` or a writable v2 tree).
* ``full``: no confinement at all, only when the user chose it.

Where confinement cannot work (no bwrap, user namespaces disabled, a
container whose seccomp profile forbids them, root without a pids cgroup) a
confined command is refused with an ``Unconfinable`` reason saying how to
fix it: never run unconfined silently. ``probe()`` tries once and caches.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .gates import FULL, READ_ONLY

BWRAP = "/usr/bin/bwrap"
PRLIMIT = "/usr/bin/prlimit"
DEFAULT_MAX_PROCESSES = 256
PROBE_TIMEOUT_S = 10.0
CGROUP_V1_PIDS = Path("/sys/fs/cgroup/pids")
CGROUP_V2 = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "agenthost-cmd-"
CGROUP_REMOVE_S = 5.0
# How the sandbox gets its /proc: a fresh one for its PID namespace; where a
# container's masked /proc forbids that, the container's, read-only (see the
# module docstring for why the runtime's /proc/<pid> stays closed).
PROC_FRESH = ("--proc", "/proc")
PROC_BOUND = ("--ro-bind", "/proc", "/proc")
PR_SET_DUMPABLE = 4
# Settings whose values name files a command must not read (tokens, keys),
# and the stack's data folder. Not every *_DIR: the web client's files, say,
# are no secret, and may be what a session works on.
HIDDEN_ENV_SUFFIX = "_FILE"
HIDDEN_ENV_PREFIX = "AGENTHOST_"
DATA_DIR_ENV = "AGENTHOST_DATA_DIR"
# The MCP servers' configuration names no *_FILE but may hold their keys.
MCP_CONFIG_ENV = "AGENTHOST_MCP_CONFIG"

_log = logging.getLogger(__name__)
# Cgroups being removed in the background (Prepared.cleanup_soon).
_cleaning: set[asyncio.Task[None]] = set()


# Reasons a command could not be confined (stable: clients and docs name them).
NO_BWRAP = "CONFINEMENT_NO_BWRAP"
NO_USER_NAMESPACES = "CONFINEMENT_NO_USER_NAMESPACES"
NO_PROCESS_LIMIT = "CONFINEMENT_NO_PROCESS_LIMIT"


@dataclass(frozen=True)
class Unconfinable:
    """Why commands cannot be confined here, and what to do about it."""

    reason: str
    message: str

    def refusal(self) -> str:
        return (
            f"Not run: commands cannot be confined on this machine ({self.reason}): "
            f"{self.message}. The user can run it unconfined with /sandbox full."
        )


@dataclass(frozen=True)
class Jail:
    """What a confined command may see and do."""

    sandbox: str
    # The session's folder (writable under workspace-write).
    cwd: Path
    network: bool = False
    # Files and folders mounted over with empty ones.
    hidden: tuple[Path, ...] = ()
    max_processes: int = DEFAULT_MAX_PROCESSES
    # Folders under /tmp shown read-only through the private /tmp: where the
    # program's own files are (an MCP server's code, its virtualenv).
    shown: tuple[Path, ...] = ()


@dataclass
class Prepared:
    """The argv to spawn and the cgroup to remove once the command ended."""

    argv: list[str]
    cgroup: Path | None = None
    refused: Unconfinable | None = None

    def cleanup_soon(self) -> None:
        """Remove the cgroup now if it is empty, else in the background: the
        result need not wait for the kernel to empty it (see settled())."""
        if self.cgroup is None:
            return
        try:
            self.cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            pass  # still busy
        task = asyncio.get_running_loop().create_task(self.cleanup())
        _cleaning.add(task)
        task.add_done_callback(_cleaning.discard)

    async def cleanup(self) -> None:
        """Remove the command's cgroup once its last process is gone (the
        kernel tears the PID namespace down just after its init died)."""
        if self.cgroup is None:
            return
        pause = 0.005
        deadline = time.monotonic() + CGROUP_REMOVE_S
        while True:
            try:
                self.cgroup.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    _log.warning("cgroup %s left behind: still busy", self.cgroup)
                    return
            await asyncio.sleep(pause)  # a bounded retry, not synchronisation
            pause = min(pause * 2, 0.2)


async def settled() -> None:
    """Wait until every command's cgroup removal has finished."""
    while _cleaning:
        await asyncio.gather(*_cleaning, return_exceptions=True)


def hidden_from_env(env: Mapping[str, str], data_dir: Path | None) -> tuple[Path, ...]:
    """The data directory (`data_dir`, else AGENTHOST_DATA_DIR) and every file
    an AGENTHOST_*_FILE setting names (the tokens file, TLS keys, the
    internal token, the models file), and the MCP servers' configuration."""
    paths = [data_dir] if data_dir is not None else []
    for name, value in env.items():
        wanted = name in (DATA_DIR_ENV, MCP_CONFIG_ENV) or (
            name.startswith(HIDDEN_ENV_PREFIX) and name.endswith(HIDDEN_ENV_SUFFIX)
        )
        if wanted and value:
            paths.append(Path(value))
    return tuple(dict.fromkeys(Path(os.path.abspath(p)) for p in paths))


def confined(sandbox: str) -> bool:
    return sandbox != FULL


# -- the bwrap command line ------------------------------------------------------------


def bwrap_argv(
    jail: Jail, program: list[str], bwrap: str = BWRAP, proc: tuple[str, ...] = PROC_FRESH
) -> list[str]:
    """bwrap's arguments (order matters: later mounts cover earlier ones)."""
    cwd = jail.cwd.resolve()
    argv = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--cap-drop", "ALL"]
    if jail.network:
        argv.append("--share-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", *proc, "--tmpfs", "/tmp"]
    for path in jail.shown:
        argv += ["--ro-bind", str(path), str(path)]
    hidden = _uncovered(jail.hidden, cwd)
    inside = [p for p in hidden if _within(p, cwd) and p != cwd]
    holding = [p for p in hidden if _within(cwd, p) and p != cwd]
    argv += _hide(p for p in hidden if p not in inside and p not in holding and p != cwd)
    # A hidden folder holding the session's folder (e.g. a data directory
    # that keeps workspaces) is hidden around it: the folder stays reachable.
    argv += _hide(holding, read_only=False)
    bind = "--ro-bind" if jail.sandbox == READ_ONLY else "--bind"
    argv += [bind, str(cwd), str(cwd)]
    for path in holding:
        if path.is_dir():
            argv += ["--remount-ro", str(path)]
    argv += _hide(inside)
    argv += ["--chdir", str(cwd), "--"]
    return argv + program


def _uncovered(hidden: Iterable[Path], cwd: Path) -> list[Path]:
    """The hidden paths that another hidden folder does not already cover.
    Under a folder hidden by an empty read-only mount (the data folder) a
    file (its models file, its mcp.json) no longer exists, and bwrap could
    not mount /dev/null over it: every command would fail. A path inside the
    session's folder stays, when that folder is bound again inside a hidden
    one that holds it."""
    paths = list(dict.fromkeys(hidden))
    folders = [p for p in paths if p.is_dir()]

    def covered(path: Path) -> bool:
        return any(
            path != folder
            and _within(path, folder)
            and not (_within(path, cwd) and _within(cwd, folder))
            for folder in folders
        )

    return [p for p in paths if not covered(p)]


def _hide(paths: Iterable[Path], read_only: bool = True) -> list[str]:
    """An empty, read-only folder over each folder, /dev/null over each file:
    a write there fails rather than vanish."""
    argv: list[str] = []
    for path in paths:
        if path.is_dir():
            argv += ["--tmpfs", str(path)]
            if read_only:
                argv += ["--remount-ro", str(path)]
        elif path.exists():
            argv += ["--ro-bind", "/dev/null", str(path)]
    return argv


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def limited(program: list[str], max_processes: int) -> list[str]:
    """program under RLIMIT_NPROC (counted in the sandbox's user namespace)."""
    return [PRLIMIT, f"--nproc={max_processes}:{max_processes}", "--", *program]


# -- process limits for root -------------------------------------------------------------


def _pids_cgroup_root() -> Path | None:
    """A pids hierarchy this process may make cgroups in (v1, else v2)."""
    if (CGROUP_V1_PIDS / "cgroup.procs").exists() and os.access(CGROUP_V1_PIDS, os.W_OK):
        return CGROUP_V1_PIDS
    controllers = CGROUP_V2 / "cgroup.controllers"
    if controllers.exists() and "pids" in controllers.read_text().split():
        own = _own_v2_cgroup()
        if own is not None and os.access(own, os.W_OK):
            return own
    return None


def _own_v2_cgroup() -> Path | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return CGROUP_V2 / line[3:].lstrip("/")
    return None


def _new_pids_cgroup(root: Path, max_processes: int) -> Path:
    # The owner's pid in the name: a later runtime sweeps what a dead one left.
    group = root / f"{CGROUP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
    group.mkdir()
    try:
        (group / "pids.max").write_text(str(max_processes))
    except OSError:
        group.rmdir()
        raise
    return group


def sweep_cgroups(root: Path) -> None:
    """Remove the empty command cgroups of runtimes no longer running (one
    killed before it could remove them)."""
    for group in root.glob(f"{CGROUP_PREFIX}*"):
        owner = group.name.removeprefix(CGROUP_PREFIX).partition("-")[0]
        if owner.isdigit() and not _alive(int(owner)):
            with contextlib.suppress(OSError):
                group.rmdir()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def in_cgroup(group: Path, program: list[str]) -> list[str]:
    """program started inside `group` (the shell joins it, then execs)."""
    join = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
    return ["/bin/sh", "-c", join, str(group), *program]


# -- probing -------------------------------------------------------------------------------


def probe(bwrap: str = BWRAP) -> Unconfinable | None:
    """None when confined commands work here, else why not (tried once)."""
    return _probe(bwrap)[0]


@cache
def _probe(bwrap: str = BWRAP) -> tuple[Unconfinable | None, tuple[str, ...]]:
    """Why commands cannot be confined (None: they can), and the /proc
    arguments that work here."""
    if not os.access(bwrap, os.X_OK):
        missing = f"{bwrap} is missing; install bubblewrap (Debian: apt-get install bubblewrap)"
        return Unconfinable(NO_BWRAP, missing), PROC_FRESH
    if os.geteuid() == 0:
        root = _pids_cgroup_root()
        if root is None:
            return _no_cgroup(), PROC_FRESH
        sweep_cgroups(root)
    said = _try(bwrap, PROC_FRESH)
    if said is None:
        return None, PROC_FRESH
    if "proc" in said and _try(bwrap, PROC_BOUND) is None:
        return None, PROC_BOUND
    return (
        Unconfinable(
            NO_USER_NAMESPACES,
            f"bubblewrap cannot make a sandbox ({said}); user namespaces must be allowed "
            "(sysctl kernel.unprivileged_userns_clone=1; in a container, the seccomp profile, "
            "AppArmor setting and unmasked /proc of deploy/README.md)",
        ),
        PROC_FRESH,
    )


def _try(bwrap: str, proc: tuple[str, ...]) -> str | None:
    """None when a sandbox with these /proc arguments runs here, else why not."""
    argv = bwrap_argv(Jail(READ_ONLY, Path("/")), ["/bin/true"], bwrap, proc)
    try:
        done = subprocess.run(argv, capture_output=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not start: {error}"
    if done.returncode == 0:
        return None
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit {done.returncode}"


def make_non_dumpable() -> None:
    """Close this process's /proc/<pid> files (environ, mem, fd) to every
    process without CAP_SYS_PTRACE, the same user's commands included."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def prepare(jail: Jail, program: list[str], bwrap: str = BWRAP) -> Prepared:
    """How to spawn `program` confined by `jail`, or why it cannot be."""
    if not confined(jail.sandbox):
        return Prepared(program)
    problem, proc = _probe(bwrap)
    if problem is not None:
        return Prepared([], refused=problem)
    if os.geteuid() != 0:
        return Prepared(bwrap_argv(jail, limited(program, jail.max_processes), bwrap, proc))
    # Root: RLIMIT_NPROC would not bind it, the cgroup does (no prlimit).
    argv = bwrap_argv(jail, program, bwrap, proc)
    root = _pids_cgroup_root()
    if root is None:
        return Prepared([], refused=_no_cgroup())
    try:
        group = _new_pids_cgroup(root, jail.max_processes)
    except OSError as error:
        return Prepared([], refused=Unconfinable(NO_PROCESS_LIMIT, f"no pids cgroup: {error}"))
    return Prepared(in_cgroup(group, argv), cgroup=group)


def _no_cgroup() -> Unconfinable:
    return Unconfinable(
        NO_PROCESS_LIMIT,
        "the runtime runs as root, which the kernel's process limit exempts, and no pids "
        "cgroup is writable; run agenthost as a non-root user",
    )


def describe() -> str:
    """One line for `agenthost up`: whether commands are confined here."""
    problem = probe()
    if problem is None:
        where = shutil.which("bwrap") or BWRAP
        return f"commands: confined by bubblewrap ({where})"
    return f"commands: NOT confinable ({problem.reason}): {problem.message}"
