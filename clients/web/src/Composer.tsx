import { useState, type FormEvent, type KeyboardEvent } from "react";
import type { AppModel } from "./model.js";

/**
 * The message box: locked until a workspace is chosen (a session is open).
 * `/help` lists the commands; `/name [arguments]` runs one the session
 * offers (`/plan`, `/compact [focus]`, a custom command of the workspace);
 * anything else is a message, queued while a turn runs.
 */
export function Composer({ model }: { model: AppModel }) {
  const [text, setText] = useState("");
  const [sending, setSending] = useState(false);
  const locked = model.session === undefined;
  const send = async (event?: FormEvent) => {
    event?.preventDefault();
    if (locked || sending || !text.trim()) return;
    setSending(true);
    // The text stays when the host refuses it: send again after fixing it.
    if (await model.submit(text)) setText("");
    setSending(false);
  };
  const onKey = (event: KeyboardEvent) => {
    if (event.key === "Enter" && !event.shiftKey) void send(event);
  };
  return (
    <form className="composer" data-testid="composer" data-locked={locked} onSubmit={(event) => void send(event)}>
      <textarea
        data-testid="composer-input"
        disabled={locked}
        placeholder={locked ? "Choose a workspace first (New session)" : "Message, or /help for the commands"}
        value={text}
        onChange={(event) => setText(event.target.value)}
        onKeyDown={onKey}
      />
      <button type="submit" data-testid="send" disabled={locked || sending || !text.trim()}>
        {model.session?.running ? "Queue" : "Send"}
      </button>
    </form>
  );
}
