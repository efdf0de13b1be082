import { useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import type { AppModel } from "./model.js";
import { PathSuggestions, usePathSuggestions, withPath } from "./PathSuggestions.js";

/**
 * The message box: locked until a workspace is chosen (a session is open).
 * `/help` lists the commands; `/name [arguments]` runs one the session
 * offers (`/plan`, `/compact [focus]`, a custom command of the workspace);
 * anything else is a message, queued while a turn runs. After an `@` it
 * offers the session folder's paths (Tab or a click takes one): the file is
 * attached to the message.
 */
export function Composer({ model }: { model: AppModel }) {
  const [text, setText] = useState("");
  const [caret, setCaret] = useState(0);
  const [sending, setSending] = useState(false);
  const input = useRef<HTMLTextAreaElement>(null);
  const locked = model.session === undefined;
  const suggestions = usePathSuggestions(model.session, text, caret);
  const send = async (event?: FormEvent) => {
    event?.preventDefault();
    if (locked || sending || !text.trim()) return;
    setSending(true);
    // The text stays when the host refuses it: send again after fixing it.
    if (await model.submit(text)) setText("");
    setSending(false);
  };
  const choose = (path: string) => {
    const taken = withPath(text, caret, path);
    if (taken === undefined) return;
    setText(taken.text);
    setCaret(taken.caret);
    requestAnimationFrame(() => input.current?.setSelectionRange(taken.caret, taken.caret));
  };
  const onKey = (event: KeyboardEvent) => {
    if (event.key === "Tab" && suggestions[0] !== undefined) {
      event.preventDefault();
      choose(suggestions[0].path);
    } else if (event.key === "Enter" && !event.shiftKey) void send(event);
  };
  return (
    <form className="composer" data-testid="composer" data-locked={locked} onSubmit={(event) => void send(event)}>
      <PathSuggestions entries={suggestions} choose={choose} />
      <textarea
        ref={input}
        data-testid="composer-input"
        disabled={locked}
        placeholder={locked ? "Choose a workspace first (New session)" : "Message (@path attaches a file), or /help for the commands"}
        value={text}
        onChange={(event) => {
          setText(event.target.value);
          setCaret(event.target.selectionStart);
        }}
        onSelect={(event) => setCaret(event.currentTarget.selectionStart)}
        onKeyDown={onKey}
      />
      <button type="submit" data-testid="send" disabled={locked || sending || !text.trim()}>
        {model.session?.running ? "Queue" : "Send"}
      </button>
    </form>
  );
}
