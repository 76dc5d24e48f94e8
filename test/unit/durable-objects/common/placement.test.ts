import { describe, expect, it } from "vitest";
import { bucketIn, namespaceIn } from "../../../../durable-objects/common/placement.ts";
import type { Env } from "../../../../env.ts";

/** A namespace whose `jurisdiction()` records what it was asked, or throws as workerd does. */
function namespace(throws: boolean) {
  const asked: string[] = [];
  const ns = {
    asked,
    jurisdiction(j: string) {
      asked.push(j);
      if (throws) throw new Error("Jurisdiction restrictions are not implemented in workerd.");
      return { placedIn: j };
    },
  };
  return ns as typeof ns & DurableObjectNamespace;
}

describe("placement", () => {
  it("asks a namespace for the tenant's jurisdiction, and nothing for a tenant without one", () => {
    const ns = namespace(false);
    expect(namespaceIn({ SPINDLE_ENV: "production" }, ns, "eu")).toEqual({ placedIn: "eu" });
    expect(namespaceIn({ SPINDLE_ENV: "production" }, ns, "fedramp")).toEqual({
      placedIn: "fedramp",
    });
    expect(namespaceIn({ SPINDLE_ENV: "production" }, ns, null)).toBe(ns);
    expect(ns.asked).toEqual(["eu", "fedramp"]);
  });

  it("never falls back to the plain namespace in production; in development it does", () => {
    const ns = namespace(true);
    expect(() => namespaceIn({ SPINDLE_ENV: "production" }, ns, "eu")).toThrow(
      "Jurisdiction restrictions are not implemented in workerd.",
    );
    expect(() => namespaceIn({}, ns, "eu")).toThrow();
    expect(namespaceIn({ SPINDLE_ENV: "development" }, ns, "eu")).toBe(ns);
  });

  it("picks the jurisdiction's bucket binding, and none when the deployment lacks it", () => {
    const env = { ROLLOUT: "global", ROLLOUT_EU: "eu" } as unknown as Env;
    expect([bucketIn(env, null), bucketIn(env, "eu"), bucketIn(env, "fedramp")]).toEqual([
      "global",
      "eu",
      undefined,
    ]);
  });
});
