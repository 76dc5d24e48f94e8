/**
 * Schemas are built on first use (`shared/zod/on-first-use.ts`): importing the worker's app
 * builds none, a request that validates nothing (`GET /healthz`) builds none, and a schema is
 * built when it is first used, once. zod/mini's constructors are counted through a module mock.
 */
import { beforeEach, describe, expect, it, vi } from "vitest";

const built = vi.hoisted(() => ({ calls: [] as string[] }));

vi.mock("zod/mini", async (importOriginal) => {
  const zod = await importOriginal<Record<string, unknown>>();
  // Every zod/mini function but the locale setting builds a schema or a check.
  const counted = Object.entries(zod).map(([name, value]) =>
    typeof value === "function" && /^_?[a-z]/.test(name) && name !== "config"
      ? [
          name,
          (...args: unknown[]) => {
            built.calls.push(name);
            return (value as (...a: unknown[]) => unknown)(...args);
          },
        ]
      : [name, value],
  );
  return Object.fromEntries(counted);
});

describe("schemas built on first use", () => {
  beforeEach(() => {
    built.calls.length = 0;
  });

  it("importing the worker's app and serving GET /healthz builds no schema", async () => {
    const { createApp } = await import("../../../worker/app.ts");
    await import("../../../shared/api/index.ts");
    expect(built.calls).toEqual([]);
    // An environment as the runtime passes one (the CORS check reads its vars).
    const answer = await createApp().request("/healthz", {}, {});
    expect(answer.status).toBe(200);
    expect(built.calls).toEqual([]);
  });

  it("builds a schema the first time it is used, and only then", async () => {
    const { StartTurnBodySchema } = await import("../../../shared/api/index.ts");
    expect(built.calls).toEqual([]);
    expect(StartTurnBodySchema.safeParse({ input: "hello" }).success).toBe(true);
    const first = built.calls.length;
    expect(first).toBeGreaterThan(0);
    expect(StartTurnBodySchema.safeParse({ input: 42 }).success).toBe(false);
    expect(built.calls.length).toBe(first);
  });
});
