import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App.js";
import { sessionInUrl, takeToken } from "./location.js";
import { AppModel } from "./model.js";
import "./styles.css";

const root = createRoot(document.getElementById("root")!);
const token = takeToken();
// The gateway's web port serves this page: its calls go to the same origin.
const model = token === undefined ? undefined : new AppModel(token, window.location.origin);
// Started once per page, outside React (whose StrictMode runs effects twice
// in development); the session in the address reopens after a reload.
if (model !== undefined) {
  const wanted = sessionInUrl();
  void model.start().then(() => (wanted === undefined ? undefined : model.openSession(wanted)));
  // Ends the stream at once, so the gateway lets the connection go.
  window.addEventListener("pagehide", () => void model.close());
}
root.render(
  <StrictMode>
    <App model={model} />
  </StrictMode>,
);
