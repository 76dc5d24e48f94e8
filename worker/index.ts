import { Hono } from "hono";
import type { Env } from "./env.ts";

export { Thread } from "../durable-objects/thread.ts";

const app = new Hono<{ Bindings: Env }>();

app.get("/healthz", (c) => c.json({ ok: true, service: "spindle" }));

export default app;
