import type { Session } from "@agenthost/sdk/web";
import { useEffect, useRef, useState } from "react";
import { Diff, looksLikeDiff } from "./Diff.js";
import { Markdown } from "./Markdown.js";
import { openQuestions, permissionRules, type AppModel, type QuestionView } from "./model.js";

/** The open questions of the `questions` projection: plan reviews and tool approvals. */
export function QuestionCards({ model, session }: { model: AppModel; session: Session }) {
  return (
    <div className="questions">
      {openQuestions(session.projections.get("questions")).map((question, index) =>
        question.presentation === "plan-review" ? (
          <PlanReview key={question.question_id} model={model} question={question} />
        ) : question.presentation === "tool-approval" ? (
          <ToolApproval key={question.question_id} model={model} question={question} keys={index === 0} asker={askerOf(session, question)} />
        ) : (
          <GenericQuestion key={question.question_id} model={model} question={question} />
        ),
      )}
    </div>
  );
}

function PlanReview({ model, question }: { model: AppModel; question: QuestionView }) {
  const [feedback, setFeedback] = useState("");
  const answer = (kind: Parameters<AppModel["answer"]>[1]) => void model.answer(question.question_id, kind);
  return (
    <section className="card plan-review" data-testid="plan-review" data-question-id={question.question_id}>
      <h3>{question.title || "Review the plan"}</h3>
      <Markdown text={question.body} testId="plan-body" />
      <div className="actions">
        <button data-testid="plan-approve" onClick={() => answer({ case: "approve", value: true })}>
          {question.approve_label || "Approve"}
        </button>
        <button data-testid="plan-dismiss" onClick={() => answer({ case: "dismiss", value: true })}>
          Dismiss
        </button>
      </div>
      <div className="feedback">
        <textarea data-testid="plan-feedback" placeholder="What should change?" value={feedback} onChange={(event) => setFeedback(event.target.value)} />
        <button data-testid="plan-keep-planning" disabled={!feedback.trim()} onClick={() => answer({ case: "feedback", value: feedback.trim() })}>
          Keep planning
        </button>
      </div>
    </section>
  );
}

// Keys that answer the first open approval while no draft has the focus.
const APPROVAL_KEYS: Record<string, Parameters<AppModel["answer"]>[1]> = {
  y: { case: "allowOnce", value: true },
  a: { case: "allowForSession", value: true },
  n: { case: "deny", value: "" },
};

/** Whether `target` is a text field holding a draft (its next keys are words). */
function isDraft(target: EventTarget | null): boolean {
  const field = target instanceof HTMLElement ? target.closest("input, textarea, [contenteditable]") : null;
  if (field instanceof HTMLTextAreaElement || field instanceof HTMLInputElement) return field.value !== "";
  return field !== null && (field.textContent ?? "") !== "";
}

/** Which subagent asks a question raised inside it ("" for the session's own). */
function askerOf(session: Session, question: QuestionView): string {
  if (!question.child_session_id) return "";
  const child = session.subagents.find((c) => c.sessionId === question.child_session_id);
  return child === undefined ? "A subagent asks" : `Subagent ${child.agentType} · ${child.description} asks`;
}

function ToolApproval({ model, question, keys, asker }: { model: AppModel; question: QuestionView; keys: boolean; asker: string }) {
  const answer = (kind: Parameters<AppModel["answer"]>[1]) => void model.answer(question.question_id, kind);
  const approval = question.approval;
  const allowOnce = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!keys) return;
    // The question takes the focus (the turn waits for it): Enter allows once;
    // not from a text field with a draft in it, whose next keys are words.
    if (!isDraft(document.activeElement)) allowOnce.current?.focus();
    const onKey = (event: KeyboardEvent) => {
      // Judged at the key, not when the question came: an empty field (the
      // composer just sent from) is no draft, so its keys answer.
      if (event.ctrlKey || event.metaKey || event.altKey || isDraft(event.target)) return;
      const chosen = APPROVAL_KEYS[event.key.toLowerCase()];
      if (chosen === undefined) return;
      event.preventDefault();
      void model.answer(question.question_id, chosen);
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [keys, model, question.question_id]);
  return (
    <section className="card tool-approval" data-testid="tool-approval" data-question-id={question.question_id} data-tool={approval?.tool} data-child-id={question.child_session_id ?? ""}>
      {asker && (
        <p className="asker" data-testid="approval-asker">
          {asker}:
        </p>
      )}
      <h3>{question.title || `Allow ${approval?.tool ?? "this tool"}?`}</h3>
      <p>{approval?.summary}</p>
      {approval?.detail && (looksLikeDiff(approval.detail) ? <Diff diff={approval.detail} testId="approval-diff" /> : <pre>{approval.detail}</pre>)}
      <div className="actions">
        <button ref={allowOnce} data-testid="approval-allow-once" onClick={() => answer({ case: "allowOnce", value: true })}>
          Allow once
        </button>
        <button data-testid="approval-allow-session" onClick={() => answer({ case: "allowForSession", value: true })} title={approval?.grant}>
          Allow for this session
        </button>
        <button data-testid="approval-always-session" onClick={() => answer({ case: "alwaysAllowSession", value: true })} title="A permission rule of this session (/permissions revokes it)">
          Always allow here
        </button>
        <button data-testid="approval-always-workspace" onClick={() => answer({ case: "alwaysAllowWorkspace", value: true })} title="A permission rule of every session of this workspace (/permissions revokes it)">
          Always allow in this workspace
        </button>
        <button data-testid="approval-deny" onClick={() => answer({ case: "deny", value: "" })}>
          Deny
        </button>
        {keys && (
          <span className="keys" data-testid="approval-keys">
            <kbd>y</kbd> once · <kbd>a</kbd> session · <kbd>n</kbd> deny
          </span>
        )}
      </div>
    </section>
  );
}

/** The permission rules this session's log holds (the `permissions` projection), each revocable. */
export function PermissionRules({ model, session }: { model: AppModel; session: Session }) {
  const rules = permissionRules(session.projections.get("permissions"));
  if (rules.length === 0) return null;
  return (
    <section className="card permissions" data-testid="permissions">
      <h3>Always allowed</h3>
      <ul>
        {rules.map((rule) => (
          <li key={rule.rule_id} data-testid="permission-rule" data-rule-id={rule.rule_id} data-scope={rule.scope}>
            <code>{rule.grant === "edit" ? "every file change" : rule.grant.replace(/^shell:/, "$ ")}</code> ({rule.scope})
            <button data-testid="permission-revoke" onClick={() => void model.revokeRule(rule.rule_id)}>
              Revoke
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}

function GenericQuestion({ model, question }: { model: AppModel; question: QuestionView }) {
  return (
    <section className="card" data-testid="question" data-question-id={question.question_id}>
      <h3>{question.title}</h3>
      <pre>{question.body}</pre>
      <button onClick={() => void model.answer(question.question_id, { case: "dismiss", value: true })}>Dismiss</button>
    </section>
  );
}
