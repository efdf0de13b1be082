import { useRef, useState, type ClipboardEvent, type DragEvent, type FormEvent, type KeyboardEvent } from "react";
import { DraftThumbnails, draftImages, promptImages, type DraftImage } from "./DraftImages.js";
import type { AppModel } from "./model.js";
import { PathSuggestions, usePathSuggestions, withPath } from "./PathSuggestions.js";

/**
 * The message box: locked until a workspace is chosen (a session is open).
 * `/help` lists the commands; `/name [arguments]` runs one the session
 * offers (`/plan`, `/compact [focus]`, a custom command of the workspace);
 * anything else is a message, queued while a turn runs. After an `@` it
 * offers the session folder's paths (Tab or a click takes one): the file is
 * attached to the message. An image pasted or dropped on it is sent with
 * the message, shown as a thumbnail until then (× takes it out).
 */
export function Composer({ model }: { model: AppModel }) {
  const [text, setText] = useState("");
  const [caret, setCaret] = useState(0);
  const [sending, setSending] = useState(false);
  const input = useRef<HTMLTextAreaElement>(null);
  const locked = model.session === undefined;
  const suggestions = usePathSuggestions(model.session, text, caret);
  const [images, setImages] = useState<DraftImage[]>([]);
  const empty = !text.trim() && images.length === 0;
  const send = async (event?: FormEvent) => {
    event?.preventDefault();
    if (locked || sending || empty) return;
    setSending(true);
    // An image alone is sent with its name as the message's text.
    const said = text.trim() ? text : images.map((i) => `[image: ${i.name}]`).join(" ");
    // The text and images stay when the host refuses them: send again after fixing it.
    if (await model.submit(said, promptImages(images))) {
      setText("");
      for (const image of images) URL.revokeObjectURL(image.url);
      setImages([]);
    }
    setSending(false);
  };
  const add = async (files: Iterable<File>) => {
    const added = await draftImages(files);
    if (added.length > 0) setImages((now) => [...now, ...added]);
    return added.length > 0;
  };
  const remove = (id: number) => {
    const gone = images.find((i) => i.id === id);
    if (gone !== undefined) URL.revokeObjectURL(gone.url);
    setImages((now) => now.filter((i) => i.id !== id));
  };
  const onPaste = (event: ClipboardEvent) => {
    const files = [...event.clipboardData.files];
    if (files.some((file) => file.type.startsWith("image/"))) {
      event.preventDefault(); // the image, not its name as text
      void add(files);
    }
  };
  const onDrop = (event: DragEvent) => {
    const files = [...event.dataTransfer.files];
    if (locked || files.length === 0) return;
    event.preventDefault();
    void add(files);
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
    <form
      className="composer"
      data-testid="composer"
      data-locked={locked}
      onSubmit={(event) => void send(event)}
      onDragOver={(event) => event.preventDefault()}
      onDrop={onDrop}
    >
      <PathSuggestions entries={suggestions} choose={choose} />
      <DraftThumbnails images={images} remove={remove} />
      <textarea
        ref={input}
        data-testid="composer-input"
        disabled={locked}
        placeholder={locked ? "Choose a workspace first (New session)" : "Message (@path attaches a file; paste or drop an image), or /help for the commands"}
        value={text}
        onChange={(event) => {
          setText(event.target.value);
          setCaret(event.target.selectionStart);
        }}
        onSelect={(event) => setCaret(event.currentTarget.selectionStart)}
        onKeyDown={onKey}
        onPaste={onPaste}
      />
      <button type="submit" data-testid="send" disabled={locked || sending || empty}>
        {model.session?.running ? "Queue" : "Send"}
      </button>
    </form>
  );
}
