"""The kinds of subagent a `task` call may start: the built-in `general` and
the read-only `explore`, and agent files, in Claude Code's format unchanged
(`.claude/agents/*.md`: YAML front matter `name`, `description`, optional
`tools` and `model`; the body is the agent's instructions), found in the
session's `.agenthost/agents/`, the project's and the session's
`.claude/agents/`, and the user's config folder's `agents/`.

A file that cannot be used (no name or description, broken YAML, a name
taken by an earlier one) is a problem `/agents` lists, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ...claude_names import agenthost_tools
from ..front_matter import FrontMatterError, parse, read_text, text_field
from ..instructions import project_root

# Tools that change nothing: what a read-only agent is offered.
READ_TOOLS = ("read_file", "list_dir", "glob", "grep")
GENERAL = "general"
EXPLORE = "explore"
# Claude Code's `model: inherit` and its family names: the parent's model.
INHERIT_MODELS = frozenset({"", "inherit", "sonnet", "opus", "haiku"})


@dataclass(frozen=True)
class AgentType:
    name: str
    description: str
    # Its instructions, a system-prompt section of its requests.
    prompt: str = ""
    # The tools it is offered (empty: all of its parent's).
    tools: tuple[str, ...] = ()
    # A configured model's name ("": its parent's).
    model: str = ""
    # Its sandbox is read-only, whatever its parent's.
    read_only: bool = False
    # Where it was found ("built-in" or a file's path).
    source: str = "built-in"


BUILT_IN = (
    AgentType(
        GENERAL,
        "A general agent for multi-step tasks: research, edits, commands. It works in "
        "its own context and answers with a report.",
        "You are a subagent: another agent gave you the task below. Do it fully, then "
        "answer with a concise report of what you found or did (the other agent sees "
        "only your final answer).",
    ),
    AgentType(
        EXPLORE,
        "A fast read-only agent for finding code: searches and reads files, changes "
        "nothing, and answers with what it found (paths and lines).",
        "You are a read-only subagent that explores a codebase. Search and read files "
        "to answer the task; you cannot change files or run commands. Answer with the "
        "relevant paths, lines and a short explanation.",
        tools=READ_TOOLS,
        read_only=True,
    ),
)


@dataclass(frozen=True)
class Found:
    types: tuple[AgentType, ...]
    # (file, what is wrong with it)
    problems: tuple[tuple[str, str], ...]

    def get(self, name: str) -> AgentType | None:
        return next((t for t in self.types if t.name == name), None)


def folders(cwd: Path, config_dir: Path) -> list[Path]:
    """Where agent files are looked for, first found first kept."""
    root = project_root(cwd)
    places = [cwd / ".agenthost" / "agents", cwd / ".claude" / "agents"]
    if root != cwd:
        places.append(root / ".claude" / "agents")
    places.append(config_dir / "agents")
    return places


def discover(cwd: Path, config_dir: Path) -> Found:
    types = list(BUILT_IN)
    problems: list[tuple[str, str]] = []
    for path in _agent_files(folders(cwd, config_dir)):
        try:
            found = read_agent(path)
        except FrontMatterError as error:
            problems.append((str(path), str(error)))
            continue
        if any(t.name == found.name for t in types):
            problems.append((str(path), f"the name {found.name!r} is taken"))
            continue
        types.append(found)
    return Found(tuple(types), tuple(problems))


def _agent_files(places: Iterable[Path]) -> list[Path]:
    files: list[Path] = []
    for folder in places:
        if folder.is_dir():
            files += sorted(p for p in folder.glob("*.md") if p.is_file())
    return files


def read_agent(path: Path) -> AgentType:
    text, _ = read_text(path)
    document = parse(text)
    fields = document.fields
    name = text_field(fields, "name", required=True)
    description = text_field(fields, "description", required=True)
    tools = fields.get("tools")
    if isinstance(tools, str):
        listed = [t.strip() for t in tools.split(",") if t.strip()]
    elif isinstance(tools, list) and all(isinstance(t, str) for t in tools):
        listed = [t.strip() for t in tools]
    elif tools is None:
        listed = []
    else:
        raise FrontMatterError("`tools` is neither a comma-separated list nor a list of names")
    model = text_field(fields, "model", required=False)
    return AgentType(
        name,
        description,
        document.body.strip(),
        tuple(agenthost_tools(listed)),
        "" if model in INHERIT_MODELS else model,
        source=str(path),
    )
