import { describe, expect, it, vi } from "vitest";
import { allowedOrigins, EXPOSED_HEADERS } from "../../../worker/cors.ts";
import { setup, thread } from "./fake-thread.ts";

const APP = "https://app.example.com";
const DEV = "http://localhost:5173";
const ORIGINS = `${APP}, ${DEV}`;

/** Every CORS response header of `res` (`access-control-*`). */
function corsHeaders(res: Response): Record<string, string> {
  return Object.fromEntries(
    [...res.headers].filter(([name]) => name.startsWith("access-control-")),
  );
}

const preflight = (origin: string, method = "POST") => ({
  method: "OPTIONS",
  key: "",
  headers: {
    origin,
    "access-control-request-method": method,
    "access-control-request-headers": "authorization, content-type, idempotency-key",
  },
});

describe("CORS, off by default", () => {
  it("sends no CORS header and answers no preflight without SPINDLE_CORS_ORIGINS", async () => {
    for (const vars of [{}, { SPINDLE_CORS_ORIGINS: "" }, { SPINDLE_CORS_ORIGINS: " , " }]) {
      const { request, fake } = setup(vars);
      fake.threads.set("A:t1", thread("t1"));
      const res = await request("/v1/threads/t1", { headers: { origin: APP } });
      expect(res.status).toBe(200);
      expect(corsHeaders(res)).toEqual({});
      expect(res.headers.get("vary")).toBeNull();
      const pre = await request("/v1/threads/t1", preflight(APP));
      expect(pre.status).toBe(401);
      expect(corsHeaders(pre)).toEqual({});
    }
  });
});

describe("CORS for the listed origins", () => {
  it("answers a preflight from a listed origin 204 without a key, and touches no object", async () => {
    const { request, fake } = setup({ SPINDLE_CORS_ORIGINS: ORIGINS });
    const res = await request("/v1/threads/t1/turns", preflight(DEV));
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect(corsHeaders(res)).toEqual({
      "access-control-allow-origin": DEV,
      "access-control-allow-methods": "GET,POST,PATCH,DELETE",
      "access-control-allow-headers":
        "Authorization,Content-Type,Idempotency-Key,Last-Event-ID,x-request-id",
      "access-control-expose-headers": EXPOSED_HEADERS.join(","),
      "access-control-max-age": "600",
    });
    expect(res.headers.get("vary")).toContain("Origin");
    expect(fake.calls).toEqual([]);
  });

  it("gives a listed origin's request its origin back and exposes the headers the API sends", async () => {
    const { request, json, fake } = setup({ SPINDLE_CORS_ORIGINS: ORIGINS });
    fake.threads.set("A:t1", thread("t1"));
    const res = await request("/v1/threads/t1", { headers: { origin: APP } });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe(APP);
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    const exposed = res.headers.get("access-control-expose-headers")?.toLowerCase().split(",");
    for (const name of ["x-request-id", "location", "retry-after", "www-authenticate"]) {
      expect(exposed).toContain(name);
    }
    expect(res.headers.get("vary")).toContain("Origin");
    // Errors too: a page reads the problem document and its headers.
    const created = await json("/v1/threads", { id: "t2" }, { headers: { origin: APP } });
    expect(created.status).toBe(201);
    expect(created.headers.get("access-control-allow-origin")).toBe(APP);
    const refused = await request("/v1/threads/t1", { key: "sk-nobody", headers: { origin: APP } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("access-control-allow-origin")).toBe(APP);
  });

  it("gives an origin not listed no CORS header at all, and no preflight", async () => {
    const { request, fake } = setup({ SPINDLE_CORS_ORIGINS: ORIGINS });
    fake.threads.set("A:t1", thread("t1"));
    for (const origin of [
      "https://evil.example.com",
      "https://app.example.com.evil.test",
      "null",
    ]) {
      const res = await request("/v1/threads/t1", { headers: { origin } });
      expect(res.status).toBe(200);
      expect(corsHeaders(res)).toEqual({});
      expect(res.headers.get("vary")).toContain("Origin");
      const pre = await request("/v1/threads/t1", preflight(origin));
      expect(pre.status).toBe(401);
      expect(corsHeaders(pre)).toEqual({});
    }
  });

  it("an OPTIONS that is not a preflight (no Access-Control-Request-Method) is no preflight", async () => {
    const { request } = setup({ SPINDLE_CORS_ORIGINS: ORIGINS });
    const res = await request("/v1/threads/t1", {
      method: "OPTIONS",
      key: "",
      headers: { origin: APP },
    });
    expect(res.status).toBe(401);
    expect(corsHeaders(res)).toEqual({});
  });
});

describe("allowedOrigins", () => {
  it("reads exact origins, forgiving case and a trailing slash", () => {
    expect([
      ...allowedOrigins(" https://App.Example.com/ ,http://localhost:5173,https://a.test:8443"),
    ]).toEqual([APP, DEV, "https://a.test:8443"]);
  });

  it("an entry that is not an origin allows nothing, and is logged", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const raw = "*, https://app.example.com/path, app.example.com, https://ok.test";
      expect([...allowedOrigins(raw)]).toEqual(["https://ok.test"]);
      const events = warn.mock.calls.map(([line]) => JSON.parse(String(line)));
      expect(events.map((e) => e.event)).toEqual(Array(3).fill("cors.origin_ignored"));
      expect(events[1].reason).toContain("https://app.example.com/path");
    } finally {
      warn.mockRestore();
    }
  });
});
