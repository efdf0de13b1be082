"""The MCP configuration files and the `mcp` fold: what a user writes, what
the runtime makes of it, and what the projection shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import McpFold, McpServerView, fold_mcp, mcp_status_event
from services.agentruntime.mcp import config
from services.agentruntime.mcp.config import McpConfigError, ServerConfig
from services.agentruntime.mcp.servers import tool_name
from services.agentruntime.models.base import (
    AssistantMessage,
    Image,
    ModelRequest,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from services.agentruntime.models.openai_compat import request_body
from services.projection.session_units import MCP_UNIT


def write(path: Path, servers: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_the_common_shape_gives_stdio_and_http_servers() -> None:
    text = json.dumps(
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "srv"], "env": {"K": "v"}},
                "web": {"url": "http://127.0.0.1:3001/mcp", "timeout": 5},
            }
        }
    )
    files, web = config.parse(text, config.DEPLOYMENT)
    assert (files.transport, files.command, files.args, files.env) == (
        "stdio",
        "npx",
        ("-y", "srv"),
        (("K", "v"),),
    )
    assert (web.transport, web.url, web.call_timeout_s) == ("http", web.url, 5.0)
    # Confined, without the network, unless the entry says otherwise.
    assert (files.network, files.sandbox) == (False, "workspace-write")


def test_an_entry_may_turn_the_network_on_or_run_unconfined() -> None:
    entries = {
        "net": {"command": "x", "network": True},
        "free": {"command": "x", "sandbox": "full"},
    }
    net, free = config.parse(json.dumps({"mcpServers": entries}), config.WORKSPACE)
    assert (net.network, net.sandbox) == (True, "workspace-write")
    assert (free.network, free.sandbox) == (False, "full")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "not JSON"),
        ('{"servers": {}}', '{"mcpServers"'),
        ('{"mcpServers": {"a b": {"command": "x"}}}', "letters, digits"),
        ('{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}', "either a command"),
        ('{"mcpServers": {"a": {"url": "file:///x"}}}', "http(s) address"),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "list of strings"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}', "env must map"),
        ('{"mcpServers": {"a": {"command": "x", "timeout": 0}}}', "positive number"),
        ('{"mcpServers": {"a": {"command": "x", "network": "yes"}}}', "true or false"),
        ('{"mcpServers": {"a": {"command": "x", "sandbox": "none"}}}', "'full', not 'none'"),
        ('{"mcpServers": {"a": {"url": "http://h", "network": true}}}', "stdio servers"),
    ],
)
def test_a_bad_file_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(McpConfigError) as error:
        config.parse(text, config.WORKSPACE)
    assert says in str(error.value)


def test_the_workspace_replaces_the_deployments_server_of_the_same_name(tmp_path: Path) -> None:
    deployment = write(
        tmp_path / "deployment.json",
        {"shared": {"command": "old"}, "only-here": {"url": "https://example.test/mcp"}},
    )
    write(tmp_path / "ws" / ".agenthost/mcp.json", {"shared": {"command": "new"}})
    loaded = config.load(deployment, tmp_path / "ws")
    assert [(s.name, s.scope) for s in loaded.servers] == [
        ("only-here", "deployment"),
        ("shared", "workspace"),
    ]
    assert loaded.servers[1].command == "new" and loaded.broken == ()


def test_a_broken_file_does_not_hide_the_other(tmp_path: Path) -> None:
    deployment = write(tmp_path / "deployment.json", {"ok": {"command": "srv"}})
    (tmp_path / "ws/.agenthost").mkdir(parents=True)
    (tmp_path / "ws/.agenthost/mcp.json").write_text("{nope")
    loaded = config.load(deployment, tmp_path / "ws")
    assert [s.name for s in loaded.servers] == ["ok"]
    assert [b.scope for b in loaded.broken] == ["workspace"]


def test_the_deployment_file_is_the_flag_else_the_data_dir(tmp_path: Path) -> None:
    assert config.deployment_path({}, tmp_path) == tmp_path / "mcp.json"
    chosen = {config.CONFIG_ENV: "/etc/agenthost/mcp.json"}
    assert config.deployment_path(chosen, tmp_path) == Path("/etc/agenthost/mcp.json")


def test_tool_names_are_namespaced_and_safe_for_providers() -> None:
    assert tool_name("everything", "echo") == "mcp__everything__echo"
    assert tool_name("s", "a.b/c d") == "mcp__s__a_b_c_d"
    assert len(tool_name("s", "x" * 300)) == 128


def test_the_mcp_fold_keeps_the_last_status_and_round_trips_a_checkpoint() -> None:
    servers = (
        McpServerView("a", "ready", "stdio", 3, "", "workspace"),
        McpServerView("b", "failed", "http", 0, "refused", "deployment"),
    )
    event = ev.Event(mcp_status=mcp_status_event(servers))
    state = fold_mcp(McpFold(), event)
    assert state.servers == servers
    # An event that changes nothing gives the very same state (the engine relies on it).
    assert fold_mcp(state, event) is state
    assert fold_mcp(state, ev.Event(turn_start=ev.TurnStart(turn_id="t"))) is state
    assert MCP_UNIT.load(MCP_UNIT.dump(state)) == state
    view = MCP_UNIT.view(state)
    assert isinstance(view, dict)
    assert view["servers"][1] == {
        "name": "b",
        "state": "failed",
        "transport": "http",
        "tools": 0,
        "error": "refused",
        "scope": "deployment",
    }


def test_a_server_config_is_a_value() -> None:
    # Connections are keyed by it: an edited entry is a new connection.
    assert ServerConfig("a", "workspace", command="x") == ServerConfig(
        "a", "workspace", command="x"
    )
    assert ServerConfig("a", "workspace", command="x") != ServerConfig(
        "a", "workspace", command="y"
    )


def test_tool_images_go_to_the_model_only_when_it_takes_images() -> None:
    png = Image("image/png", b"\x89PNG")
    request = ModelRequest(
        messages=[
            UserMessage("draw"),
            AssistantMessage(
                "", (ToolCallRequest("a", "t", "{}"), ToolCallRequest("b", "t", "{}"))
            ),
            ToolResultMessage("a", "[image image/png, 4 bytes]", images=(png,)),
            ToolResultMessage("b", "no image"),
            AssistantMessage("done"),
        ]
    )
    plain = request_body(request, "m")["messages"]
    assert [m["role"] for m in plain] == ["user", "assistant", "tool", "tool", "assistant"]
    sent = request_body(request, "m", images=True)["messages"]
    # After the step's tool messages (never between them), one user message of images.
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert sent[4]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw=="},
    }


def test_tool_images_join_a_prompt_that_follows_them_as_one_user_turn() -> None:
    """Providers that refuse two user turns in a row get the images and the
    steered prompt after them as one user message of parts."""
    png = Image("image/png", b"\x89PNG")
    request = ModelRequest(
        messages=[
            UserMessage("draw"),
            AssistantMessage("", (ToolCallRequest("a", "t", "{}"),)),
            ToolResultMessage("a", "[image image/png, 4 bytes]", images=(png,)),
            UserMessage("now make it blue"),
        ]
    )
    sent = request_body(request, "m", images=True)["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    parts = sent[3]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text"]
    assert parts[2] == {"type": "text", "text": "now make it blue"}
