// What the page takes from its address: the bearer token and the open session.
//
// The token: `agenthost up` prints the page's URL with `#token=…`. A
// fragment never leaves the browser (not in requests, server logs or
// Referer headers), so the token reaches this page and nothing else. The
// page keeps it in sessionStorage (this tab only, gone when the tab closes;
// a reload keeps it) and removes the fragment from the address bar and the
// tab's history at once, so a copied URL or a screenshot does not carry it.

const TOKEN_KEY = "agenthost.token";
const SESSION_PARAM = "session";

/** The token from the fragment (kept for this tab), else the one kept before. */
export function takeToken(): string | undefined {
  const fragment = new URLSearchParams(window.location.hash.slice(1));
  const fromUrl = fragment.get("token");
  if (fromUrl) {
    window.sessionStorage.setItem(TOKEN_KEY, fromUrl);
    fragment.delete("token");
    const rest = fragment.toString();
    const url = new URL(window.location.href);
    url.hash = rest ? `#${rest}` : "";
    window.history.replaceState(null, "", url);
  }
  return window.sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

/** The session named in the address (`?session=…`), so a reload reopens it. */
export function sessionInUrl(): string | undefined {
  return new URL(window.location.href).searchParams.get(SESSION_PARAM) ?? undefined;
}

export function showSessionInUrl(sessionId: string | undefined): void {
  const url = new URL(window.location.href);
  if (sessionId === undefined) url.searchParams.delete(SESSION_PARAM);
  else url.searchParams.set(SESSION_PARAM, sessionId);
  window.history.replaceState(null, "", url);
}
