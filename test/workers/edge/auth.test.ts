import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";

const base = "http://spindle.test";

async function problem(res: Response): Promise<unknown> {
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  return res.json();
}

describe("worker in workerd", () => {
  it("runs the tests as development, though wrangler.toml deploys as production", () => {
    expect(env.SPINDLE_ENV).toBe("development");
  });

  it("answers the liveness probe without a key", async () => {
    const res = await exports.default.fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, service: "spindle" });
  });

  it("a request without a key is a 401 unauthorized problem", async () => {
    const res = await exports.default.fetch(`${base}/v1/threads/t1`);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe('Bearer realm="spindle"');
    expect(await problem(res)).toEqual({
      type: "/problems/unauthorized",
      title: "Authentication is required",
      status: 401,
      detail: "Send an API key as `Authorization: Bearer <key>`.",
      code: "unauthorized",
    });
  });

  it("a wrong key is a 401 unauthorized problem (native timingSafeEqual path)", async () => {
    expect(typeof crypto.subtle.timingSafeEqual).toBe("function");
    const res = await exports.default.fetch(`${base}/v1/threads/t1`, {
      headers: { authorization: "Bearer sk-wrong" },
    });
    expect(res.status).toBe(401);
    expect(await problem(res)).toMatchObject({
      code: "unauthorized",
      detail: "The API key is not valid.",
    });
  });

  it("the development key passes authentication in development", async () => {
    const headers = { authorization: "Bearer sk-local-dev", "content-type": "application/json" };
    const unknown = await exports.default.fetch(`${base}/v1/nope`, { headers });
    expect(unknown.status).toBe(404);
    expect(await problem(unknown)).toMatchObject({ code: "not_found" });

    const invalid = await exports.default.fetch(`${base}/v1/threads`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: 1 }),
    });
    expect(invalid.status).toBe(400);
    expect(await problem(invalid)).toMatchObject({ errors: [{ path: "/model" }] });
  });
});
