#!/usr/bin/env node
// `npm start [-- wrangler dev args]`: the local service, offline, on 127.0.0.1:8787 unless the
// arguments say otherwise (wrangler rejects a repeated --port, so defaults are added only when absent).
import { spawn } from "node:child_process";

const args = process.argv.slice(2);
const has = (flag) => args.some((a) => a === flag || a.startsWith(`${flag}=`));
const defaults = [];
if (!has("--ip")) defaults.push("--ip", "127.0.0.1");
if (!has("--port")) defaults.push("--port", "8787");
if (!has("--show-interactive-dev-session")) defaults.push("--show-interactive-dev-session=false");

const child = spawn("wrangler", ["dev", ...defaults, "--var", "SPINDLE_ENV:development", ...args], {
  stdio: "inherit",
  env: { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false" },
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
