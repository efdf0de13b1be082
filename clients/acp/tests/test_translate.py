"""What an editor is shown of agenthost's log and questions (pure mapping)."""

from __future__ import annotations

from dataclasses import replace

from acp import schema as acp
from acp.helpers import embedded_text_resource, resource_block, text_block
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from clients.acp import translate
from clients.sdk import ModelInfo, ModelPrices, Question, Resource, Todo, Usage

NEW_FILE = """--- /dev/null
+++ b/NOTES.md
@@ -0,0 +1,2 @@
+# Notes
+hello
"""
EDIT = """--- a/src/x.py
+++ b/src/x.py
@@ -1,3 +1,3 @@
 a = 1
-b = 2
+b = 3
 c = 4
@@ -10,2 +10,2 @@
-z = 0
+z = 1
 end
"""


def test_a_new_file_diff_has_no_old_text_and_an_absolute_path() -> None:
    assert translate.diff_hunks(NEW_FILE, "/work/p") == [
        ("/work/p/NOTES.md", None, "# Notes\nhello\n")
    ]


def test_an_edit_shows_each_hunk_before_and_after() -> None:
    assert translate.diff_hunks(EDIT, "/work/p") == [
        ("/work/p/src/x.py", "a = 1\nb = 2\nc = 4\n", "a = 1\nb = 3\nc = 4\n"),
        ("/work/p/src/x.py", "z = 0\nend\n", "z = 1\nend\n"),
    ]


def _approval() -> Question:
    return Question.from_event(
        ev.QuestionAsked(
            question_id="q1",
            presentation=ev.QUESTION_PRESENTATION_TOOL_APPROVAL,
            title="Run a command?",
            call_id="call-1",
            approval=ev.ToolApproval(
                tool="shell", summary="$ pytest -q", detail="pytest -q", grant="shell:pytest -q"
            ),
        )
    )


def test_a_tool_approval_offers_the_four_choices_and_each_maps_to_an_answer() -> None:
    options = translate.permission_options(_approval())
    assert [o.kind for o in options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    # "Always" is a workspace rule: the editor's folder, its other threads too.
    assert options[1].name == "Always allow shell:pytest -q in this folder"
    answers = [translate.answer_for_option(o.option_id) for o in options]
    assert answers == [
        {"allow_once": True},
        {"always_allow_workspace": True},
        {"deny": ""},
        {"deny": ""},
    ]
    call = translate.permission_tool_call(_approval())
    assert (call.tool_call_id, call.kind, call.title) == ("call-1", "execute", "$ pytest -q")


def test_a_plan_review_is_approve_or_keep_planning_with_feedback() -> None:
    review = Question("q2", "plan-review", "Ready to code?", "# Plan", approve_label="Approve")
    options = translate.permission_options(review)
    assert [(o.option_id, o.name) for o in options] == [
        ("approve", "Approve"),
        ("keep-planning", "Keep planning"),
    ]
    assert translate.answer_for_option("approve") == {"approve": True}
    assert translate.answer_for_option("keep-planning", "add tests") == {"feedback": "add tests"}
    assert translate.answer_for_option("keep-planning") == {
        "feedback": translate.KEEP_PLANNING_FEEDBACK
    }
    assert translate.answer_for_option("something else") is None


def test_usage_is_sent_once_there_is_a_request_with_a_known_window() -> None:
    usage = Usage(
        model="deep",
        context_tokens=1200,
        context_window=8000,
        context_share=0.15,
        prompt_tokens=1000,
        completion_tokens=200,
        cached_prompt_tokens=0,
        requests=1,
        cost=0.5,
        estimated=False,
    )
    assert translate.usage_update(None) is None
    assert translate.usage_update(replace(usage, context_window=0)) is None
    update = translate.usage_update(usage)
    assert update is not None
    assert update.model_dump(by_alias=True, exclude_none=True) == {
        "sessionUpdate": "usage_update",
        "used": 1200,
        "size": 8000,
        "cost": {"amount": 0.5, "currency": "USD"},
    }
    unpriced = translate.usage_update(replace(usage, cost=None))
    assert unpriced is not None and unpriced.cost is None


def test_slash_commands_are_the_sessions_own() -> None:
    assert translate.slash_command("/plan", ["plan"]) == translate.SlashCommand("plan", None)
    assert translate.slash_command("/plan do it\nwell", ["plan"]) == translate.SlashCommand(
        "plan", "do it\nwell"
    )
    assert translate.slash_command("/etc/hosts is odd", ["plan"]) is None


def test_a_prompts_resources_are_named_in_its_text_and_sent_to_be_attached() -> None:
    blocks = [
        text_block("compare "),
        resource_block(embedded_text_resource("file:///p/a.py", "x = 1")),
        text_block(" with "),
        acp.ResourceContentBlock(type="resource_link", name="b.py", uri="file:///p/b.py"),
    ]
    parts = translate.prompt_parts(blocks)
    assert parts.text == "compare [a.py](file:///p/a.py) with [b.py](file:///p/b.py)"
    assert parts.resources == [Resource("file:///p/a.py", "x = 1"), Resource("file:///p/b.py")]


def test_the_task_list_is_a_plan_update() -> None:
    update = translate.plan_update([Todo("Read", "completed"), Todo("Fix", "in_progress")])
    assert [(e.content, e.status, e.priority) for e in update.entries] == [
        ("Read", "completed", "medium"),
        ("Fix", "in_progress", "medium"),
    ]


def test_without_plan_mode_only_the_default_mode_is_offered() -> None:
    state = translate.modes(False, plan_available=False)
    assert [m.id for m in state.available_modes] == ["default"]
    [option] = translate.config_options(state, [], "")
    assert isinstance(option, acp.SessionConfigOptionSelect)
    assert option.current_value == "default"


DEEP = ModelInfo("deep", "deepseek", "deepseek-chat", 128_000, 8192, ModelPrices(0.27, 1.1), True)
ALT = ModelInfo("alt", "builtin", "builtin-echo", 32_000, 4096, None, False)


def test_the_models_are_a_config_option_of_category_model_the_sessions_selected() -> None:
    state = translate.modes(False, plan_available=True)
    mode, model = translate.config_options(state, [DEEP, ALT], "")
    assert isinstance(model, acp.SessionConfigOptionSelect)
    assert (mode.id, model.id, model.category) == ("mode", "model", "model")
    # A session that names no model has the default.
    assert model.current_value == "deep"
    assert [(o.value, o.description) for o in model.options] == [
        ("deep", "deepseek-chat (deepseek), 128k context, $0.27/$1.1 per M tokens, the default"),
        ("alt", "builtin-echo (builtin), 32k context"),
    ]
    assert translate.model_option([DEEP, ALT], "alt").current_value == "alt"
    # One the models file no longer lists is still shown as the session's.
    gone = translate.model_option([DEEP, ALT], "old")
    assert gone.current_value == "old" and gone.options[-1].value == "old"


def test_a_changed_option_is_told_with_every_option() -> None:
    state = translate.modes(True, plan_available=True)
    options = translate.config_options(state, [DEEP, ALT], "alt")
    current, update = translate.mode_updates(state, options)
    assert current.current_mode_id == "plan"
    assert [o.current_value for o in update.config_options] == ["plan", "alt"]


def test_a_commands_hint_is_what_follows_its_name() -> None:
    update = translate.commands_update(
        [
            rt.CommandInfo(name="review", description="Review (project)", usage="/review FILE"),
            rt.CommandInfo(name="skills", description="List the skills.", usage="/skills"),
        ]
    )
    review, skills = update.available_commands
    assert review.input is not None and review.input.root.hint == "FILE"
    assert skills.input is None
