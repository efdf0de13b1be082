import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App.js";
import { takeToken } from "./location.js";
import { AppModel } from "./model.js";
import "./styles.css";

const root = createRoot(document.getElementById("root")!);
const token = takeToken();
// The gateway's web port serves this page: its calls go to the same origin.
const model = token === undefined ? undefined : new AppModel(token, window.location.origin);
root.render(
  <StrictMode>
    <App model={model} />
  </StrictMode>,
);
