// Markdown of a model's answer or a plan, as HTML. The model's text is not
// trusted: markdown-it runs with html: false, so raw HTML in it (a <script>,
// an <img onerror>) is escaped and shown as text, never parsed as markup; its
// link check refuses javascript:, vbscript: and data: URLs; images are not
// rendered (a reply must not make the page fetch addresses of its choosing).
// Code blocks are highlighted once the highlighter's chunk has loaded.
import MarkdownIt from "markdown-it";
import { useEffect, useMemo, useState } from "react";
import "./rich.css";

type Highlight = (code: string, language: string) => string | undefined;

let highlighter: Highlight | undefined;
let loading: Promise<void> | undefined;

function loadHighlighter(): Promise<void> {
  loading ??= import("./highlight.js").then((module) => {
    highlighter = module.highlight;
  });
  return loading;
}

const markdown = new MarkdownIt({
  html: false,
  linkify: true,
  // Returns escaped HTML (highlight.js escapes) or "" for markdown-it to escape the code itself.
  highlight: (code, language) => highlighter?.(code, language.trim().toLowerCase()) ?? "",
}).disable("image");

const renderLink = markdown.renderer.rules.link_open;
markdown.renderer.rules.link_open = (tokens, index, options, env, self) => {
  // Links leave the page in a new tab and learn nothing of it.
  tokens[index]?.attrSet("target", "_blank");
  tokens[index]?.attrSet("rel", "noopener noreferrer");
  return renderLink ? renderLink(tokens, index, options, env, self) : self.renderToken(tokens, index, options);
};

const FENCE = /^ {0,3}(```|~~~)/m;

/** Markdown as the page shows it; `testId` names the element for tests. */
export function Markdown({ text, testId }: { text: string; testId?: string }) {
  const [highlighting, setHighlighting] = useState(highlighter !== undefined);
  const hasCode = FENCE.test(text);
  useEffect(() => {
    if (!hasCode || highlighting) return;
    let live = true;
    void loadHighlighter().then(() => live && setHighlighting(true));
    return () => {
      live = false;
    };
  }, [hasCode, highlighting]);
  const html = useMemo(() => markdown.render(text).trimEnd(), [text, highlighting]);
  return <div className="markdown" data-testid={testId} dangerouslySetInnerHTML={{ __html: html }} />;
}
