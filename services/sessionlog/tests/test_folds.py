"""The fold of a session's log: one test per rule, then properties over random logs."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev
from google.protobuf.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from agenthost_core.folds import (
    ANSWERED_KEPT,
    JOBS_ENDED_KEPT,
    JOBS_KINDS,
    MODEL_SAW_PLAN_KINDS,
    PERMISSIONS_KINDS,
    PLAN_KINDS,
    PLAN_POLICY_SECTION_ID,
    QUESTIONS_KINDS,
    SETTINGS_KINDS,
    TURN_KINDS,
    Approval,
    JobsFold,
    PendingCall,
    PermissionRule,
    PermissionsFold,
    Question,
    QuestionsFold,
    QueuedInput,
    SessionState,
    SettingsFold,
    TurnFold,
    dump_state,
    fold_events,
    fold_jobs,
    fold_model_saw_plan,
    fold_permissions,
    fold_plan,
    fold_questions,
    fold_settings,
    fold_turn,
    jobs_view,
    last_title,
    load_jobs,
    load_permissions,
    load_plan,
    load_questions,
    load_settings,
    load_state,
    load_turn,
    permissions_view,
    questions_view,
    settings_event,
    status_view,
)
from agenthost_core.plan import PlanState


def numbered(events: Iterable[ev.Event]) -> list[ev.Event]:
    """Copies of `events` with gapless seqs from 0."""
    out = []
    for seq, event in enumerate(events):
        copy = ev.Event()
        copy.CopyFrom(event)
        copy.seq = seq
        out.append(copy)
    return out


def folded(*events: ev.Event) -> SessionState:
    return fold_events(SessionState(), numbered(events))


# -- events -------------------------------------------------------------------------


def plan_mode(active: bool) -> ev.Event:
    return ev.Event(plan_mode=ev.PlanMode(active=active))


def selection(active: bool) -> ev.Event:
    return ev.Event(plan_selection=ev.PlanSelection(active=active))


def header(*section_ids: str) -> ev.Event:
    sections = [ev.PromptSection(id=i) for i in section_ids]
    return ev.Event(request_header=ev.RequestHeader(sections=sections))


def turn_start(turn_id: str = "t1") -> ev.Event:
    return ev.Event(turn_start=ev.TurnStart(turn_id=turn_id))


def turn_end(turn_id: str = "t1") -> ev.Event:
    return ev.Event(turn_end=ev.TurnEnd(turn_id=turn_id))


def step_start(step: int) -> ev.Event:
    return ev.Event(step_start=ev.StepStart(step=step))


def step_end(step: int) -> ev.Event:
    return ev.Event(step_end=ev.StepEnd(step=step))


def tool_call(call_id: str) -> ev.Event:
    return ev.Event(tool_call=ev.ToolCall(call_id=call_id, name="shell", args_json="{}"))


def tool_result(call_id: str) -> ev.Event:
    return ev.Event(tool_result=ev.ToolResult(call_id=call_id, ok=True))


def queued(input_id: str, mode: ev.InputMode.ValueType = ev.INPUT_MODE_QUEUE) -> ev.Event:
    return ev.Event(input_queued=ev.InputQueued(input_id=input_id, text="hi", mode=mode))


def user_message(event_id: str = "") -> ev.Event:
    return ev.Event(id=event_id, user_message=ev.UserMessage(text="hi"))


def asked(
    question_id: str,
    presentation: ev.QuestionPresentation.ValueType = ev.QUESTION_PRESENTATION_GENERIC,
    grant: str | None = None,
) -> ev.Event:
    approval = None if grant is None else ev.ToolApproval(tool="shell", grant=grant)
    return ev.Event(
        question_asked=ev.QuestionAsked(
            question_id=question_id, presentation=presentation, title="T", approval=approval
        )
    )


ALLOW_FOR_SESSION = ev.QuestionAnswer(allow_for_session=True)


def answered(question_id: str, answer: ev.QuestionAnswer = ALLOW_FOR_SESSION) -> ev.Event:
    return ev.Event(question_answered=ev.QuestionAnswered(question_id=question_id, answer=answer))


def title(text: str) -> ev.Event:
    return ev.Event(session_title=ev.SessionTitle(title=text))


def session_settings(
    sandbox: ev.Sandbox.ValueType, approvals: ev.ApprovalPolicy.ValueType
) -> ev.Event:
    return ev.Event(session_settings=ev.SessionSettings(sandbox=sandbox, approvals=approvals))


COMMAND_RUN = ev.Event(command_run=ev.CommandRun(command_id="c", name="plan"))


# -- plan mode ----------------------------------------------------------------------


def test_committed_is_false_without_a_plan_mode() -> None:
    assert folded(selection(True), header()).plan.active is False


def test_committed_is_the_last_plan_mode() -> None:
    assert folded(plan_mode(True)).plan.active is True
    assert folded(plan_mode(True), plan_mode(False)).plan.active is False


def test_a_selection_after_the_plan_mode_is_kept() -> None:
    assert folded(plan_mode(True), selection(False)).plan.pending is False


def test_pending_is_present_only_while_the_selection_differs_from_committed() -> None:
    assert folded(selection(True)).plan.pending is True
    assert folded(selection(True), selection(False)).plan.pending is None
    assert folded(plan_mode(True), selection(True)).plan.pending is None
    assert folded(plan_mode(True), selection(False)).plan.pending is False


def test_a_plan_mode_clears_an_earlier_selection() -> None:
    plan = folded(selection(True), plan_mode(False)).plan
    assert plan.pending is None


def test_model_saw_plan_is_whether_the_last_request_showed_the_plan_policy() -> None:
    assert folded().model_saw_plan is None
    assert folded(header("base", PLAN_POLICY_SECTION_ID)).model_saw_plan is True
    assert folded(header(PLAN_POLICY_SECTION_ID), header("base")).model_saw_plan is False


def test_plan_view_has_pending_only_when_pending() -> None:
    assert PlanState().view() == {"active": False}
    assert PlanState(True).selecting(True).view() == {"active": True}
    assert PlanState(True).selecting(False).view() == {"active": True, "pending": False}


# -- the turn -----------------------------------------------------------------------


def test_turn_start_opens_the_turn() -> None:
    turn = folded(turn_start("t7")).turn
    assert (turn.open, turn.turn_id, turn.step, turn.step_open) == (True, "t7", -1, False)


def test_step_start_sets_the_step_and_clears_the_calls() -> None:
    turn = folded(turn_start(), step_start(0), tool_call("c1"), step_start(1)).turn
    assert (turn.step, turn.step_open, turn.calls) == (1, True, ())


def test_tool_call_adds_a_pending_call() -> None:
    turn = folded(turn_start(), step_start(0), tool_call("c1")).turn
    assert turn.calls == (PendingCall("c1", "shell", "{}"),)


def test_tool_result_removes_the_call_by_its_id() -> None:
    turn = folded(turn_start(), step_start(0), tool_call("c1"), tool_call("c2"), tool_result("c1"))
    assert [c.call_id for c in turn.turn.calls] == ["c2"]


def test_step_end_closes_the_step() -> None:
    turn = folded(turn_start(), step_start(2), tool_call("c1"), step_end(2)).turn
    assert (turn.open, turn.step, turn.step_open, turn.calls) == (True, 2, False, ())


def test_turn_end_closes_everything_but_keeps_the_queued_inputs() -> None:
    turn = folded(turn_start(), step_start(0), tool_call("c1"), queued("i1"), turn_end()).turn
    assert turn == TurnFold(inputs=(QueuedInput("i1", "hi", steer=False),))


def test_inputs_are_split_into_queued_and_steered_by_mode() -> None:
    turn = folded(queued("i1", ev.INPUT_MODE_QUEUE), queued("i2", ev.INPUT_MODE_STEER)).turn
    assert [i.input_id for i in turn.queued] == ["i1"]
    assert [i.input_id for i in turn.steered] == ["i2"]


def test_a_user_message_whose_id_is_the_input_id_consumes_the_input() -> None:
    turn = folded(queued("i1"), queued("i2"), user_message("other"), user_message("i1")).turn
    assert [i.input_id for i in turn.inputs] == ["i2"]


def test_status_view_is_running_and_the_number_of_queued_inputs() -> None:
    turn = folded(turn_start(), queued("i1"), queued("i2", ev.INPUT_MODE_STEER)).turn
    assert status_view(turn) == {"running": True, "queued": 1}
    assert status_view(TurnFold()) == {"running": False, "queued": 0}


# -- questions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("presentation", "name"),
    [
        (ev.QUESTION_PRESENTATION_PLAN_REVIEW, "plan-review"),
        (ev.QUESTION_PRESENTATION_TOOL_APPROVAL, "tool-approval"),
        (ev.QUESTION_PRESENTATION_GENERIC, "generic"),
        (ev.QUESTION_PRESENTATION_UNSPECIFIED, "generic"),
    ],
)
def test_question_asked_opens_a_question_with_its_presentation(
    presentation: ev.QuestionPresentation.ValueType, name: str
) -> None:
    (question,) = folded(asked("q1", presentation)).questions.open
    assert (question.question_id, question.presentation, question.approval) == ("q1", name, None)


def test_from_event_copies_the_approval() -> None:
    approval = ev.ToolApproval(tool="shell", summary="$ ls", detail="ls -la", grant="shell:ls")
    question = Question.from_event(ev.QuestionAsked(question_id="q1", approval=approval))
    assert question.approval == Approval("shell", "$ ls", "ls -la", "shell:ls")


def test_question_answered_closes_it_and_records_its_id() -> None:
    questions = folded(asked("q1"), asked("q2"), answered("q1")).questions
    assert [q.question_id for q in questions.open] == ["q2"]
    assert questions.answered == ("q1",)


def test_answered_keeps_only_the_latest_ids() -> None:
    ids = [f"q{n}" for n in range(ANSWERED_KEPT + 3)]
    questions = folded(*(e for i in ids for e in (asked(i), answered(i)))).questions
    assert questions.answered == tuple(ids[3:])


def test_allow_for_session_adds_the_grant_of_the_approval() -> None:
    questions = folded(asked("q1", grant="edit"), answered("q1", ALLOW_FOR_SESSION)).questions
    assert questions.grants == {"edit"}


@pytest.mark.parametrize(
    "answer",
    [
        ev.QuestionAnswer(allow_once=True),
        ev.QuestionAnswer(deny="no"),
        ev.QuestionAnswer(approve=True),
        ev.QuestionAnswer(feedback="more"),
        ev.QuestionAnswer(dismiss=True),
    ],
)
def test_other_answers_grant_nothing(answer: ev.QuestionAnswer) -> None:
    assert folded(asked("q1", grant="edit"), answered("q1", answer)).questions.grants == set()


@pytest.mark.parametrize("grant", [None, ""])
def test_allow_for_session_without_a_grant_grants_nothing(grant: str | None) -> None:
    assert folded(asked("q1", grant=grant), answered("q1")).questions.grants == set()


def test_a_second_answer_of_the_same_question_changes_nothing() -> None:
    first = folded(asked("q1", grant="edit"), asked("q2"), answered("q1")).questions
    second = answered("q1", ev.QuestionAnswer(deny="no"))
    assert fold_questions(first, second) is first


def test_turn_end_closes_every_open_question_without_answering_it() -> None:
    questions = folded(turn_start(), asked("q1", grant="edit"), asked("q2"), turn_end()).questions
    assert questions == QuestionsFold()


def test_questions_view_lists_the_open_questions_oldest_first() -> None:
    questions = folded(asked("q1", ev.QUESTION_PRESENTATION_TOOL_APPROVAL, "edit"), asked("q2"))
    common = {"title": "T", "body": "", "approve_label": "", "turn_id": "", "call_id": ""}
    assert questions_view(questions.questions) == [
        {
            "question_id": "q1",
            "presentation": "tool-approval",
            **common,
            "approval": {"tool": "shell", "summary": "", "detail": "", "grant": "edit"},
        },
        {"question_id": "q2", "presentation": "generic", **common},
    ]


# -- settings -----------------------------------------------------------------------

SANDBOXES = [ev.SANDBOX_READ_ONLY, ev.SANDBOX_WORKSPACE_WRITE, ev.SANDBOX_FULL]
POLICIES = [ev.APPROVAL_POLICY_ASK, ev.APPROVAL_POLICY_ASK_FOR_COMMANDS, ev.APPROVAL_POLICY_NEVER]


def test_settings_default_to_workspace_write_and_ask() -> None:
    assert folded().settings == SettingsFold("workspace-write", "ask")


def test_session_settings_sets_both() -> None:
    state = folded(session_settings(ev.SANDBOX_FULL, ev.APPROVAL_POLICY_NEVER))
    assert state.settings == SettingsFold("full", "never", origin="session")


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("approvals", POLICIES)
def test_settings_event_round_trips_through_fold_settings(
    sandbox: ev.Sandbox.ValueType, approvals: ev.ApprovalPolicy.ValueType
) -> None:
    state = fold_settings(SettingsFold(), session_settings(sandbox, approvals))
    event = ev.Event(session_settings=settings_event(state))
    assert fold_settings(SettingsFold(), event) == state


# -- the whole session --------------------------------------------------------------


def test_a_session_stays_blank_through_plan_command_and_title_events() -> None:
    assert folded(plan_mode(True), selection(False), COMMAND_RUN, title("x")).blank is True


@pytest.mark.parametrize("event", [turn_start(), user_message()])
def test_a_turn_start_or_a_user_message_ends_the_blank_state(event: ev.Event) -> None:
    assert folded(title("x"), event).blank is False


def test_the_title_is_the_last_session_title() -> None:
    assert folded().title == ""
    assert folded(title("a"), turn_start(), title("b")).title == "b"
    assert folded(title("a"), title("")).title == ""


def test_last_seq_follows_the_events() -> None:
    assert folded().last_seq == -1
    assert folded(turn_start(), COMMAND_RUN, turn_end()).last_seq == 2


def test_last_title_is_the_title_of_the_last_session_title() -> None:
    assert last_title([]) is None
    assert last_title([turn_start()]) is None
    assert last_title([title("a"), turn_start(), title("b")]) == "b"
    assert last_title([title("a"), title("")]) == ""


# -- jobs ---------------------------------------------------------------------------


def job_started(job_id: str, kind: ev.JobKind.ValueType = ev.JOB_KIND_BACKGROUND) -> ev.Event:
    return ev.Event(job_started=ev.JobStarted(job_id=job_id, kind=kind, command="make  watch"))


def job_ended(
    job_id: str, reason: ev.JobEndReason.ValueType = ev.JOB_END_REASON_EXITED, **fields: Any
) -> ev.Event:
    return ev.Event(job_ended=ev.JobEnded(job_id=job_id, reason=reason, **fields))


def test_a_started_job_runs_until_it_ends() -> None:
    running = folded(job_started("job-1"), job_started("term-1", ev.JOB_KIND_TERMINAL)).jobs
    assert [(j.job_id, j.kind, j.command, j.running) for j in running.jobs] == [
        ("job-1", "background", "make watch", True),
        ("term-1", "terminal", "make watch", True),
    ]
    assert (running.backgrounds, running.terminals) == (1, 1)
    ended = fold_jobs(running, job_ended("job-1", exit_code=2, output_bytes=7))
    job = ended.find("job-1")
    assert job is not None and (job.state, job.exit_code, job.signal) == ("exited", 2, None)
    assert [j.job_id for j in ended.running()] == ["term-1"]


def test_a_job_ends_once_lost_or_killed_and_says_how() -> None:
    jobs = folded(
        job_started("job-1"),
        job_started("job-2"),
        job_ended("job-1", ev.JOB_END_REASON_LOST, message="its runtime stopped"),
        job_ended("job-2", ev.JOB_END_REASON_KILLED, signal=15),
        job_ended("job-2", ev.JOB_END_REASON_EXITED, exit_code=0),
    ).jobs
    assert [(j.state, j.signal) for j in jobs.jobs] == [("lost", None), ("killed", 15)]
    assert jobs_view(jobs)["jobs"][0]["message"] == "its runtime stopped"


def test_only_the_latest_ended_jobs_are_kept_and_every_running_one() -> None:
    events = [job_started("job-0")]
    for n in range(1, JOBS_ENDED_KEPT + 6):
        events += [job_started(f"job-{n}"), job_ended(f"job-{n}")]
    jobs = folded(*events).jobs
    assert len(jobs.jobs) == JOBS_ENDED_KEPT + 1 and jobs.jobs[0].job_id == "job-0"
    assert jobs.backgrounds == JOBS_ENDED_KEPT + 6


# -- properties ---------------------------------------------------------------------


def body(
    kind: str, message: Callable[..., Message], /, **fields: Any
) -> st.SearchStrategy[ev.Event]:
    def wrap(value: Message) -> ev.Event:
        event = ev.Event()
        getattr(event, kind).CopyFrom(value)
        return event

    return st.builds(message, **fields).map(wrap)


TURN_IDS = st.sampled_from(["t1", "t2"])
CALL_IDS = st.sampled_from(["c1", "c2", "c3"])
QUESTION_IDS = st.sampled_from(["q1", "q2", "q3"])
INPUT_IDS = st.sampled_from(["i1", "i2", "i3"])
TEXTS = st.sampled_from(["", "a", "b"])
RULE_IDS = st.sampled_from(["r1", "r2"])
JOB_IDS = st.sampled_from(["job-1", "job-2", "term-1"])
ANSWERS = st.sampled_from(
    [
        ev.QuestionAnswer(allow_for_session=True),
        ev.QuestionAnswer(allow_once=True),
        ev.QuestionAnswer(deny=""),
        ev.QuestionAnswer(approve=True),
        ev.QuestionAnswer(feedback="more"),
        ev.QuestionAnswer(dismiss=True),
    ]
)
APPROVALS = st.none() | st.builds(ev.ToolApproval, grant=st.sampled_from(["", "edit", "shell:ls"]))
SECTIONS = st.lists(
    st.sampled_from(["base", PLAN_POLICY_SECTION_ID]).map(lambda i: ev.PromptSection(id=i)),
    max_size=2,
)


def asked_with_ids(ids: st.SearchStrategy[str]) -> st.SearchStrategy[ev.Event]:
    return body(
        "question_asked",
        ev.QuestionAsked,
        question_id=ids,
        presentation=st.sampled_from(list(ev.QuestionPresentation.values())),
        approval=APPROVALS,
    )


def answered_with_ids(ids: st.SearchStrategy[str]) -> st.SearchStrategy[ev.Event]:
    return body("question_answered", ev.QuestionAnswered, question_id=ids, answer=ANSWERS)


USER_MESSAGES = st.builds(
    lambda event_id: ev.Event(id=event_id, user_message=ev.UserMessage(text="hi")),
    INPUT_IDS | st.sampled_from(["", "u1"]),
)
EVENTS = st.one_of(
    body("turn_start", ev.TurnStart, turn_id=TURN_IDS),
    body("turn_end", ev.TurnEnd, turn_id=TURN_IDS),
    body("step_start", ev.StepStart, step=st.integers(0, 2)),
    body("step_end", ev.StepEnd, step=st.integers(0, 2)),
    USER_MESSAGES,
    body("request_header", ev.RequestHeader, sections=SECTIONS),
    body("tool_call", ev.ToolCall, call_id=CALL_IDS, name=st.just("shell"), args_json=TEXTS),
    body("tool_result", ev.ToolResult, call_id=CALL_IDS, ok=st.booleans()),
    body("plan_mode", ev.PlanMode, active=st.booleans()),
    body("plan_selection", ev.PlanSelection, active=st.booleans()),
    body("session_title", ev.SessionTitle, title=TEXTS),
    body(
        "input_queued",
        ev.InputQueued,
        input_id=INPUT_IDS,
        text=TEXTS,
        mode=st.sampled_from([ev.INPUT_MODE_QUEUE, ev.INPUT_MODE_STEER]),
    ),
    asked_with_ids(QUESTION_IDS),
    answered_with_ids(QUESTION_IDS),
    body(
        "session_settings",
        ev.SessionSettings,
        sandbox=st.sampled_from(SANDBOXES),
        approvals=st.sampled_from(POLICIES),
        model=st.sampled_from(["", "big"]),
        network=st.booleans(),
    ),
    # Only the whole state's last_compaction_seq looks at it.
    body("compaction", ev.Compaction, summary=TEXTS, trigger=st.just("auto")),
    body(
        "permission_rule_added",
        ev.PermissionRuleAdded,
        rule_id=RULE_IDS,
        grant=st.sampled_from(["edit", "shell:ls"]),
        scope=st.sampled_from([ev.PERMISSION_SCOPE_SESSION, ev.PERMISSION_SCOPE_WORKSPACE]),
        workspace_path=st.sampled_from(["", "/w"]),
    ),
    body("permission_rule_revoked", ev.PermissionRuleRevoked, rule_id=RULE_IDS),
    body(
        "job_started",
        ev.JobStarted,
        job_id=JOB_IDS,
        kind=st.sampled_from([ev.JOB_KIND_BACKGROUND, ev.JOB_KIND_TERMINAL]),
        command=TEXTS,
    ),
    body(
        "job_ended",
        ev.JobEnded,
        job_id=JOB_IDS,
        reason=st.sampled_from(list(ev.JobEndReason.values())[1:]),
        exit_code=st.none() | st.integers(0, 2),
        signal=st.none() | st.integers(1, 15),
    ),
    # Kinds no fold looks at.
    body("assistant_message", ev.AssistantMessage, text=TEXTS),
    body("model_usage", ev.ModelUsage, prompt_tokens=st.integers(0, 10**6)),
    body("command_run", ev.CommandRun, command_id=st.just("c"), name=st.just("plan")),
    body("command_done", ev.CommandDone, command_id=st.just("c")),
)


# Runs that match up: a selection and the plan/mode after it, a call and its result,
# an input and the message that runs it, a question and its answer or its turn's end.
MATCHED = st.one_of(
    st.tuples(TURN_IDS, QUESTION_IDS).map(
        lambda p: [turn_start(p[0]), asked(p[1], grant="edit"), turn_end(p[0])]
    ),
    st.tuples(st.booleans(), st.booleans()).map(lambda p: [selection(p[0]), plan_mode(p[1])]),
    CALL_IDS.map(lambda c: [tool_call(c), tool_result(c)]),
    st.tuples(INPUT_IDS, st.sampled_from([ev.INPUT_MODE_QUEUE, ev.INPUT_MODE_STEER])).map(
        lambda p: [queued(*p), user_message(p[0])]
    ),
    st.tuples(
        QUESTION_IDS,
        st.sampled_from([None, "", "edit", "shell:ls"]),
        st.just(ALLOW_FOR_SESSION) | ANSWERS,
    ).map(
        lambda p: [asked(p[0], ev.QUESTION_PRESENTATION_TOOL_APPROVAL, p[1]), answered(p[0], p[2])]
    ),
    st.tuples(QUESTION_IDS, st.sampled_from(["edit", "shell:ls"])).map(
        lambda p: [asked(p[0], ev.QUESTION_PRESENTATION_TOOL_APPROVAL, p[1]), answered(p[0])]
    ),
)
# Random events interleaved with matching runs.
LOGS = st.lists(EVENTS.map(lambda e: [e]) | MATCHED, max_size=30).map(
    lambda runs: numbered(e for run in runs for e in run)
)

# Each sub-fold, the state it starts from, its loader and the kinds it looks at.
SubFold = tuple[Callable[[Any, ev.Event], Any], object, Callable[[Any], Any], frozenset[str]]
SUB_FOLDS: list[SubFold] = [
    (fold_plan, PlanState(), load_plan, PLAN_KINDS),
    (fold_turn, TurnFold(), load_turn, TURN_KINDS),
    (fold_questions, QuestionsFold(), load_questions, QUESTIONS_KINDS),
    (fold_settings, SettingsFold(), load_settings, SETTINGS_KINDS),
    (fold_permissions, PermissionsFold(), load_permissions, PERMISSIONS_KINDS),
    (fold_jobs, JobsFold(), load_jobs, JOBS_KINDS),
]
SUB_FOLD_IDS = ["plan", "turn", "questions", "settings", "permissions", "jobs"]


@given(events=LOGS, cuts=st.lists(st.integers(0, 40), max_size=5))
def test_folding_in_arbitrary_chunks_equals_the_cold_fold(
    events: list[ev.Event], cuts: list[int]
) -> None:
    state = SessionState()
    bounds = [0, *sorted(cuts), len(events)]
    for start, end in itertools.pairwise(bounds):
        state = fold_events(state, events[start:end])
    assert state == fold_events(SessionState(), events)


@given(events=LOGS)
def test_a_restored_checkpoint_then_the_rest_equals_the_cold_fold(events: list[ev.Event]) -> None:
    cold = fold_events(SessionState(), events)
    for k in range(len(events) + 1):
        restored = load_state(dump_state(fold_events(SessionState(), events[:k])))
        assert fold_events(restored, events[k:]) == cold


@pytest.mark.parametrize("sub_fold", SUB_FOLDS, ids=SUB_FOLD_IDS)
@given(events=LOGS)
def test_a_restored_sub_fold_checkpoint_then_the_rest_equals_the_cold_fold(
    sub_fold: SubFold, events: list[ev.Event]
) -> None:
    fold, initial, load, _ = sub_fold
    states = [initial]
    for event in events:
        states.append(fold(states[-1], event))
    for k, state in enumerate(states):
        restored = load(json.loads(dump_state(state)))
        assert restored == state
        for event in events[k:]:
            restored = fold(restored, event)
        assert restored == states[-1]


@pytest.mark.parametrize("sub_fold", SUB_FOLDS, ids=SUB_FOLD_IDS)
@given(events=LOGS)
def test_a_sub_fold_returns_the_same_object_for_an_ignored_or_no_op_event(
    sub_fold: SubFold, events: list[ev.Event]
) -> None:
    fold, state, _, kinds = sub_fold
    for event in events:
        new = fold(state, event)
        if event.WhichOneof("body") not in kinds or new == state:
            assert new is state
        state = new


@given(events=LOGS, saw=st.sampled_from([None, False, True]), active=st.booleans())
def test_what_the_model_saw_changes_only_with_the_kinds_it_reads(
    events: list[ev.Event], saw: bool | None, active: bool
) -> None:
    # fold_events hands it only MODEL_SAW_PLAN_KINDS.
    for event in events:
        if event.WhichOneof("body") not in MODEL_SAW_PLAN_KINDS:
            assert fold_model_saw_plan(saw, PlanState(active=active), event) is saw


@given(events=LOGS)
def test_pending_is_never_present_right_after_a_plan_mode(events: list[ev.Event]) -> None:
    state = SessionState()
    for event in events:
        state = fold_events(state, [event])
        if event.HasField("plan_mode"):
            assert state.plan.pending is None
            assert "pending" not in state.plan.view()


MANY_QUESTION_IDS = st.integers(0, 99).map(lambda n: f"q{n}")
ASK_AND_ANSWER = MANY_QUESTION_IDS.map(
    lambda q: [asked(q), answered(q, ev.QuestionAnswer(allow_once=True))]
)
# More than ANSWERED_KEPT questions asked and answered, each run followed by random events.
QUESTION_LOGS = st.lists(
    st.tuples(ASK_AND_ANSWER, st.lists(EVENTS, max_size=2)),
    min_size=ANSWERED_KEPT + 1,
    max_size=ANSWERED_KEPT + 20,
).map(lambda runs: numbered(e for pair, rest in runs for e in (*pair, *rest)))


@settings(max_examples=30, deadline=None)
@given(events=QUESTION_LOGS)
def test_answered_never_exceeds_answered_kept(events: list[ev.Event]) -> None:
    questions = QuestionsFold()
    for event in events:
        questions = fold_questions(questions, event)
        assert len(questions.answered) <= ANSWERED_KEPT


def first_asks_only(events: list[ev.Event]) -> list[ev.Event]:
    seen: set[str] = set()
    kept = []
    for event in events:
        if event.HasField("question_asked"):
            if event.question_asked.question_id in seen:
                continue
            seen.add(event.question_asked.question_id)
        kept.append(event)
    return numbered(kept)


UNIQUE_ASK_LOGS = st.lists(
    st.one_of(EVENTS, asked_with_ids(MANY_QUESTION_IDS), answered_with_ids(MANY_QUESTION_IDS)),
    max_size=60,
).map(first_asks_only)


@given(events=UNIQUE_ASK_LOGS)
def test_open_question_ids_are_unique_when_asked_ids_are_unique(events: list[ev.Event]) -> None:
    questions = QuestionsFold()
    for event in events:
        questions = fold_questions(questions, event)
        ids = [q.question_id for q in questions.open]
        assert len(ids) == len(set(ids))


def test_a_compaction_moves_only_where_the_models_view_starts() -> None:
    compaction = ev.Event(compaction=ev.Compaction(summary="s", up_to_seq=2, trigger="auto"))
    before = folded(plan_mode(True), ev.Event(session_title=ev.SessionTitle(title="t")))
    after = fold_events(before, numbered([plan_mode(True), plan_mode(True), compaction])[2:])
    assert after.last_compaction_seq == 2
    # Plan mode, title and every other part read the whole log, compacted or not.
    assert (after.plan, after.title, after.turn, after.settings) == (
        before.plan,
        before.title,
        before.turn,
        before.settings,
    )
    assert load_state(dump_state(after)) == after


# -- permission rules -------------------------------------------------------------------


def rule_added(rule_id: str, grant: str = "edit", workspace: str = "") -> ev.Event:
    scope = ev.PERMISSION_SCOPE_WORKSPACE if workspace else ev.PERMISSION_SCOPE_SESSION
    added = ev.PermissionRuleAdded(
        rule_id=rule_id, grant=grant, scope=scope, workspace_path=workspace
    )
    return ev.Event(permission_rule_added=added)


def test_rules_are_kept_in_order_until_revoked() -> None:
    state = folded(
        rule_added("r1"),
        rule_added("r2", "shell:npm test", "/w"),
        rule_added("r1", "shell:other"),  # the same rule id again: the first stands
        ev.Event(permission_rule_revoked=ev.PermissionRuleRevoked(rule_id="r1")),
    )
    assert state.permissions == PermissionsFold(
        (PermissionRule("r2", "shell:npm test", "workspace", "/w"),)
    )
    assert state.permissions.workspace_rules("/w") == state.permissions.rules
    assert state.permissions.workspace_rules("/elsewhere") == ()
    assert permissions_view(state.permissions) == [
        {"rule_id": "r2", "grant": "shell:npm test", "scope": "workspace", "workspace_path": "/w"}
    ]


def test_revoking_an_unknown_rule_changes_nothing() -> None:
    state = PermissionsFold((PermissionRule("r1", "edit", "session"),))
    revoke = ev.Event(permission_rule_revoked=ev.PermissionRuleRevoked(rule_id="r9"))
    assert fold_permissions(state, revoke) is state


def test_network_is_a_setting_off_by_default() -> None:
    assert SettingsFold().network is False
    network = ev.SessionSettings(
        sandbox=ev.SANDBOX_WORKSPACE_WRITE, approvals=ev.APPROVAL_POLICY_ASK, network=True
    )
    on = folded(ev.Event(session_settings=network)).settings
    assert on.network is True and settings_event(on).network is True
