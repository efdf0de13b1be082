"""The chat's own slash commands and keys, and how help lists them: one
command a line with what it does, the chat's own beside the session's
(ListCommands: /plan, /compact, /permissions and whatever the host adds).

Light on purpose (no prompt_toolkit, no SDK session): `agenthost chat
--help` shows the same list without starting a chat."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.markup import escape
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class ChatCommand:
    name: str
    usage: str
    description: str


SANDBOXES = ("read-only", "workspace-write", "full")
APPROVAL_POLICIES = ("ask", "ask-for-commands", "never")
NETWORK = ("on", "off")

# What the chat itself answers (the session's commands come from the host).
OWN_COMMANDS = (
    ChatCommand("model", "/model [NAME]", "Show the models, or switch to one."),
    ChatCommand("sandbox", "/sandbox [MODE]", "Show or set where the agent may write."),
    ChatCommand("approvals", "/approvals [POLICY]", "Show or set which calls ask you first."),
    ChatCommand("network", "/network [on|off]", "Show or set whether commands go online."),
    ChatCommand("mcp", "/mcp", "Show the MCP servers and their state."),
    ChatCommand("history", "/history [N]", "Show the N turns before those shown (10)."),
    ChatCommand("output", "/output", "Show the last command's whole output."),
    ChatCommand("todos", "/todos", "Show the agent's task list."),
    ChatCommand("help", "/help", "List the commands."),
    ChatCommand("quit", "/quit", "Leave (a running turn goes on)."),
)
OWN_NAMES = frozenset(c.name for c in OWN_COMMANDS) | {"exit"}

KEYS = (
    ("Shift-Tab", "Toggle plan mode (in a turn: from its next request)."),
    ("Ctrl-C", "Cancel the running turn; at the prompt, twice to leave."),
    ("Ctrl-D", "Leave (a running turn goes on)."),
)

# The session's usual commands, for `chat --help` (no session to ask there).
HOST_EXAMPLES = (
    ChatCommand("plan", "/plan [message|off]", "Plan mode on (with a message), or off."),
    ChatCommand("compact", "/compact [focus]", "Summarise the conversation for the model."),
    ChatCommand("permissions", "/permissions [revoke RULE]", "List the rules that skip approvals."),
)


def command_lines(commands: Iterable[ChatCommand]) -> list[str]:
    """One line per command: its usage, then what it does, in a column."""
    listed = list(commands)
    width = max((len(c.usage) for c in listed), default=0)
    return [f"  {c.usage:<{width}}  {c.description}" for c in listed]


def key_lines() -> list[str]:
    width = max(len(key) for key, _ in KEYS)
    return [f"  {key:<{width}}  {what}" for key, what in KEYS]


def help_table(session_commands: Iterable[ChatCommand]) -> Table:
    """`/help`: the session's commands, the chat's own, the keys; one a
    row, what it does wrapped in its own column."""
    host = [c for c in session_commands if c.name not in OWN_NAMES]
    sections = [
        ("Commands of this session:", [(c.usage, c.description) for c in host]),
        ("The chat's own:", [(c.usage, c.description) for c in OWN_COMMANDS]),
        ("Keys:", list(KEYS)),
    ]
    shown = Table.grid()
    for heading, rows in sections:
        # A grid per section: a long usage widens its own section only.
        table = Table.grid(padding=(0, 2))
        table.add_column(no_wrap=True, style="bold")
        table.add_column()
        for usage, description in rows or [("(none)", "")]:
            table.add_row(Text(f"  {usage}"), Text(description))  # no markup: [focus]
        shown.add_row(Text(heading, style="dim"))
        shown.add_row(table)
    return shown


def chat_help() -> str:
    """`agenthost chat --help`'s text (its lines kept; brackets escaped from
    the rich markup the help is written in)."""
    text = "\n".join(
        [
            "Chat with the agent of a session in this folder's workspace.",
            "",
            "Without --session it connects to the workspace of the given folder, or",
            "of the current one (adding it, with a notice, when there is none), and",
            "reuses its blank session or starts one; --continue takes its most recent",
            "session instead, --resume offers its recent sessions to pick from.",
            "",
            "In the chat (/help lists the session's own, / opens a menu of them):",
            *command_lines([*HOST_EXAMPLES, *OWN_COMMANDS]),
            "",
            "Keys:",
            *key_lines(),
        ]
    )
    return escape(text)
