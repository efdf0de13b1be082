// Builds the page into dist/, which `agenthost up` serves on the gateway's
// web port (AGENTHOST_WEB_FILES_DIR): same origin, so no CORS and no proxy.
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  plugins: [react()],
  // Relative asset URLs: the page works wherever the web port serves it.
  base: "./",
  // One chunk: the SDK's reply validation (protovalidate with its CEL
  // interpreter) is most of it, and the page needs it before its first call.
  build: { outDir: "dist", emptyOutDir: true, sourcemap: true, chunkSizeWarningLimit: 1500 },
});
