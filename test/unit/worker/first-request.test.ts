/**
 * What an isolate's first request pays for before it is answered: the app is built then, so it
 * builds no more than the request needs.
 */
import { afterEach, describe, expect, it, vi } from "vitest";

const hashed = vi.hoisted(() => ({ count: 0 }));

vi.mock("@noble/hashes/sha2.js", async (importOriginal) => {
  const noble = await importOriginal<typeof import("@noble/hashes/sha2.js")>();
  const sha256 = Object.assign((message: Uint8Array) => {
    hashed.count++;
    return noble.sha256(message);
  }, noble.sha256);
  return { ...noble, sha256 };
});

const { createApp } = await import("../../../worker/app.ts");
const { API_ROUTES } = await import("../../../worker/routes.ts");
const { DEV_API_KEY } = await import("../../../worker/auth.ts");

const DEV_ENV = { SPINDLE_ENV: "development" };

describe("an isolate's first request", () => {
  afterEach(() => {
    hashed.count = 0;
  });

  it("GET /healthz hashes no key, in development too", async () => {
    const answer = await createApp().request("/healthz", {}, DEV_ENV);
    expect(answer.status).toBe(200);
    expect(hashed.count).toBe(0);
  });

  it("the development keys are hashed when a request presents a key", async () => {
    const answer = await createApp().request(
      "/v1/openapi.json/none",
      { headers: { Authorization: `Bearer ${DEV_API_KEY}` } },
      DEV_ENV,
    );
    // The key was read (and found): the answer is about the path, not the key.
    expect(answer.status).toBe(404);
    expect(hashed.count).toBeGreaterThan(0);
  });

  it("the router holds one entry per route, beside the app-wide middleware", () => {
    const app = createApp();
    const routeEntries = app.routes.filter((r) => r.method !== "ALL");
    expect(routeEntries).toHaveLength(Object.keys(API_ROUTES).length);
    expect(app.routes.filter((r) => r.method === "ALL").map((r) => r.path)).toEqual([
      "/*",
      "/*",
      "/v1/*",
    ]);
  });
});
