import { createHmac } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { DEV_ID_SECRET, IdTags, idTagsOf } from "../../../../durable-objects/tenant/id-tags.ts";
import {
  formatApiKey,
  hookPath,
  parseApiKey,
  parseHookPath,
} from "../../../../shared/api/index.ts";

const SECRET = "a deployment's id secret";
const tags = new IdTags(SECRET, false);
const lenient = new IdTags(SECRET, true);

/** The tag as specified, computed with Node's HMAC: the first 32 hex digits of the MAC. */
const specified = (input: string, secret = SECRET) =>
  createHmac("sha256", secret).update(input).digest("hex").slice(0, 32);

/** A character of `text` changed, at `at` (negative: from the end). */
function changed(text: string, at: number): string {
  const i = at < 0 ? text.length + at : at;
  const next = text[i] === "0" ? "1" : "0";
  return `${text.slice(0, i)}${next}${text.slice(i + 1)}`;
}

describe("key ids", () => {
  it("are 16 random characters and the tag of the jurisdiction, tenant and those characters", () => {
    const id = tags.newKeyId("eu", "acme");
    const match = /^key_([A-Za-z0-9]{16})([0-9a-f]{32})$/.exec(id);
    expect(match).not.toBeNull();
    expect(match?.[2]).toBe(specified(`key.eu.acme.${match?.[1]}`));
    // A key with the tagged id still has the key format.
    const key = formatApiKey({
      jurisdiction: "eu",
      tenant: "acme",
      keyId: id,
      secret: "s".repeat(43),
    });
    expect(parseApiKey(key)?.keyId).toBe(id);
    expect(tags.newKeyId("eu", "acme")).not.toBe(id);
  });

  it("verify for the tenant and jurisdiction they were made for, and no other", () => {
    const id = tags.newKeyId(null, "acme");
    expect(tags.keyIdValid(null, "acme", id)).toBe(true);
    expect(tags.keyIdValid("eu", "acme", id)).toBe(false);
    expect(tags.keyIdValid(null, "acme2", id)).toBe(false);
    expect(tags.keyIdValid(null, "acme", changed(id, 4))).toBe(false);
    expect(tags.keyIdValid(null, "acme", changed(id, -1))).toBe(false);
    expect(tags.keyIdValid(null, "acme", `${id}0`)).toBe(false);
    expect(tags.keyIdValid(null, "acme", id.slice(0, -1))).toBe(false);
    expect(tags.keyIdValid(null, "acme", id.toUpperCase().replace("KEY_", "key_"))).toBe(false);
    expect(new IdTags("another secret", false).keyIdValid(null, "acme", id)).toBe(false);
  });

  it("without a tag (made before tags) verify only when untagged ids are accepted", () => {
    const untagged = "key_a1B2c3D4e5F6g7H8";
    expect(tags.keyIdValid(null, "acme", untagged)).toBe(false);
    expect(lenient.keyIdValid(null, "acme", untagged)).toBe(true);
    // Other lengths were never made, tagged or not.
    for (const id of ["key_x", `${untagged}0`, `key_${"a".repeat(60)}`]) {
      expect(lenient.keyIdValid(null, "acme", id)).toBe(false);
    }
    // A tagged id is checked whatever the setting.
    expect(lenient.keyIdValid(null, "acme", changed(tags.newKeyId(null, "acme"), -1))).toBe(false);
  });
});

describe("hook tags", () => {
  it("are the tag of the jurisdiction, tenant and hook id, and verify for those only", () => {
    const tag = tags.hookTag(null, "acme", "hook_ci");
    expect(tag).toBe(specified("hook.g.acme.hook_ci"));
    expect(tags.hookTagValid(null, "acme", "hook_ci", tag)).toBe(true);
    expect(tags.hookTagValid("fedramp", "acme", "hook_ci", tag)).toBe(false);
    expect(tags.hookTagValid(null, "other", "hook_ci", tag)).toBe(false);
    expect(tags.hookTagValid(null, "acme", "hook_cd", tag)).toBe(false);
    expect(tags.hookTagValid(null, "acme", "hook_ci", changed(tag, 0))).toBe(false);
    expect(tags.hookTagValid(null, "acme", "hook_ci", tag.slice(1))).toBe(false);
    expect(tags.hookTagValid(null, "acme", "hook_ci", "")).toBe(false);
  });

  it("differ from a key's tag over the same parts, so one never passes for the other", () => {
    const random = "a1B2c3D4e5F6g7H8";
    expect(tags.hookTag(null, "acme", random)).not.toBe(specified(`key.g.acme.${random}`));
    expect(
      tags.keyIdValid(null, "acme", `key_${random}${tags.hookTag(null, "acme", random)}`),
    ).toBe(false);
  });

  it("a URL without a tag verifies only when untagged ids are accepted", () => {
    expect(tags.hookTagValid(null, "acme", "hook_ci", null)).toBe(false);
    expect(lenient.hookTagValid(null, "acme", "hook_ci", null)).toBe(true);
    expect(lenient.hookTagValid(null, "acme", "hook_ci", "0".repeat(32))).toBe(false);
  });
});

describe("hook URL paths", () => {
  it("carry the jurisdiction, the tenant, the hook id and its tag, and parse back", () => {
    for (const jurisdiction of [null, "eu", "fedramp"] as const) {
      const address = { jurisdiction, tenant: "acme-1", hookId: "hook_ci", tag: "0af9".repeat(8) };
      const path = hookPath(address);
      expect(path).toBe(
        `/hooks/${jurisdiction ? `${jurisdiction}.` : ""}acme-1/hook_ci.${"0af9".repeat(8)}`,
      );
      const [, , tenant = "", hook = ""] = path.split("/");
      expect(parseHookPath({ tenant, hook })).toEqual(address);
    }
    expect(parseHookPath({ tenant: "acme", hook: "hook_ci" })).toEqual({
      jurisdiction: null,
      tenant: "acme",
      hookId: "hook_ci",
      tag: null,
    });
  });

  it("are nothing when a segment is malformed", () => {
    for (const [tenant, hook] of [
      ["us.acme", "hook_ci"],
      ["ac:me", "hook_ci"],
      ["", "hook_ci"],
      ["acme", ""],
      ["acme", "hook ci"],
      ["acme", "hook_ci."],
      ["acme", "hook_ci.ab.cd"],
      ["acme", "hook_ci.a-b"],
      ["acme", `hook_ci.${"a".repeat(65)}`],
      ["acme", ".abc"],
    ] as const) {
      expect({ tenant, hook, parsed: parseHookPath({ tenant, hook }) }).toEqual({
        tenant,
        hook,
        parsed: undefined,
      });
    }
  });
});

describe("comparison", () => {
  const subtle = crypto.subtle as unknown as {
    timingSafeEqual?: (a: Uint8Array, b: Uint8Array) => boolean;
  };
  afterEach(() => {
    delete subtle.timingSafeEqual;
  });

  it("is constant-time: every tag is compared whole by timingSafeEqual", () => {
    // Node lacks the Workers-only `timingSafeEqual`; install a recording one.
    const compared: number[] = [];
    subtle.timingSafeEqual = (a, b) => {
      compared.push(a.byteLength, b.byteLength);
      return Buffer.from(a).equals(Buffer.from(b));
    };
    const id = tags.newKeyId(null, "acme");
    const tag = tags.hookTag(null, "acme", "hook_ci");
    expect(tags.keyIdValid(null, "acme", id)).toBe(true);
    expect(tags.keyIdValid(null, "acme", changed(id, -1))).toBe(false);
    expect(tags.hookTagValid(null, "acme", "hook_ci", tag)).toBe(true);
    expect(tags.hookTagValid(null, "acme", "hook_ci", changed(tag, 0))).toBe(false);
    expect(compared).toEqual(Array.from({ length: 8 }, () => 32));
  });
});

describe("the deployment's tags", () => {
  it("use the fixed development secret only in development, and none in production", () => {
    const dev = idTagsOf({ SPINDLE_ENV: "development" });
    expect(dev?.hookTag(null, "acme", "h")).toBe(specified("hook.g.acme.h", DEV_ID_SECRET));
    for (const secret of [undefined, "", "  "]) {
      expect(idTagsOf({ SPINDLE_ENV: "production", SPINDLE_ID_SECRET: secret })).toBeUndefined();
      expect(idTagsOf({ SPINDLE_ID_SECRET: secret })).toBeUndefined();
    }
    const set = idTagsOf({ SPINDLE_ENV: "production", SPINDLE_ID_SECRET: SECRET });
    expect(set?.hookTag(null, "acme", "h")).toBe(specified("hook.g.acme.h"));
    // A secret set in development is the one used.
    const devSet = idTagsOf({ SPINDLE_ENV: "development", SPINDLE_ID_SECRET: SECRET });
    expect(devSet?.hookTag(null, "acme", "h")).toBe(specified("hook.g.acme.h"));
  });

  it("are made once per secret, and accept untagged ids only with the var set to true", () => {
    const env = { SPINDLE_ENV: "production", SPINDLE_ID_SECRET: SECRET };
    expect(idTagsOf(env)).toBe(idTagsOf({ ...env }));
    expect(idTagsOf({ ...env, SPINDLE_ID_SECRET: "other" })).not.toBe(idTagsOf(env));
    const accepts = (value: string | boolean | undefined) =>
      idTagsOf({ ...env, SPINDLE_ACCEPT_UNTAGGED_IDS: value })?.hookTagValid(null, "a", "h", null);
    expect([
      accepts(undefined),
      accepts("false"),
      accepts("1"),
      accepts("true"),
      accepts(true),
    ]).toEqual([false, false, false, true, true]);
  });
});
