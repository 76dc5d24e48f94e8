import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import {
  hmacSha256Hex,
  newHookSecret,
  newStandardSecret,
  parseStripeHeader,
  type SignedDelivery,
  secretProblem,
  signStandard,
  verifySignature,
} from "../../../shared/webhooks/index.ts";

const encoder = new TextEncoder();
const NOW_MS = Date.UTC(2026, 11, 1, 12);
const NOW_S = Math.floor(NOW_MS / 1000);

function delivery(body: string, headers: Record<string, string>, nowMs = NOW_MS): SignedDelivery {
  return { body: encoder.encode(body), header: (name) => headers[name], nowMs };
}

const hex = (secret: string, data: string) =>
  createHmac("sha256", secret).update(data).digest("hex");

describe("GitHub: X-Hub-Signature-256 over the body", () => {
  // GitHub's documented example (validating webhook deliveries).
  const secret = "It's a Secret to Everybody";
  const signature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

  it("verifies GitHub's test vector, and computes it", async () => {
    const ok = delivery("Hello, World!", { "x-hub-signature-256": signature });
    expect(await verifySignature("github", [secret], ok)).toBe(true);
    expect(`sha256=${await hmacSha256Hex(secret, "Hello, World!")}`).toBe(signature);
  });

  it("refuses another body, another secret, a missing or malformed header", async () => {
    expect(
      await verifySignature(
        "github",
        [secret],
        delivery("Hello, World?", { "x-hub-signature-256": signature }),
      ),
    ).toBe(false);
    expect(
      await verifySignature(
        "github",
        ["another"],
        delivery("Hello, World!", { "x-hub-signature-256": signature }),
      ),
    ).toBe(false);
    expect(await verifySignature("github", [secret], delivery("Hello, World!", {}))).toBe(false);
    expect(
      await verifySignature(
        "github",
        [secret],
        delivery("Hello, World!", { "x-hub-signature-256": "sha1=757107ea" }),
      ),
    ).toBe(false);
  });

  it("accepts the previous secret as well as the current one", async () => {
    const ok = delivery("Hello, World!", { "x-hub-signature-256": signature });
    expect(await verifySignature("github", ["new-secret", secret], ok)).toBe(true);
  });
});

describe("Slack: v0 over v0:{timestamp}:{body}", () => {
  // Slack's documented example (verifying requests from Slack).
  const secret = "8f742231b10e8888abcd99yyyzzz85a5";
  const body =
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
  const headers = {
    "x-slack-request-timestamp": "1531420618",
    "x-slack-signature": "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
  };

  it("verifies Slack's test vector at its time, and not 5 minutes and a second later", async () => {
    expect(await verifySignature("slack", [secret], delivery(body, headers, 1531420618_000))).toBe(
      true,
    );
    expect(
      await verifySignature("slack", [secret], delivery(body, headers, (1531420618 + 300) * 1000)),
    ).toBe(true);
    expect(
      await verifySignature("slack", [secret], delivery(body, headers, (1531420618 + 301) * 1000)),
    ).toBe(false);
  });

  it("refuses a timestamp more than 5 minutes in the future, and a missing one", async () => {
    const ahead = String(NOW_S + 301);
    const signed = {
      "x-slack-request-timestamp": ahead,
      "x-slack-signature": `v0=${hex(secret, `v0:${ahead}:${body}`)}`,
    };
    expect(await verifySignature("slack", [secret], delivery(body, signed))).toBe(false);
    const { "x-slack-request-timestamp": _, ...without } = headers;
    expect(await verifySignature("slack", [secret], delivery(body, without, 1531420618_000))).toBe(
      false,
    );
  });
});

describe("Stripe: t=,v1= over {t}.{body}, keyed by the whole whsec_ string", () => {
  const secret = "whsec_test_secret";
  const body = '{"id":"evt_1","type":"invoice.paid"}';
  const signed = (t: number, key = secret) => `t=${t},v1=${hex(key, `${t}.${body}`)}`;

  it("verifies a fresh signature, also among others in the header", async () => {
    expect(
      await verifySignature(
        "stripe",
        [secret],
        delivery(body, { "stripe-signature": signed(NOW_S) }),
      ),
    ).toBe(true);
    const several = `t=${NOW_S},v1=${"0".repeat(64)},v0=abc,v1=${hex(secret, `${NOW_S}.${body}`)}`;
    expect(
      await verifySignature("stripe", [secret], delivery(body, { "stripe-signature": several })),
    ).toBe(true);
  });

  it("refuses a stale timestamp, another key, the key without its prefix", async () => {
    const stale = delivery(body, { "stripe-signature": signed(NOW_S - 301) });
    expect(await verifySignature("stripe", [secret], stale)).toBe(false);
    const other = delivery(body, { "stripe-signature": signed(NOW_S, "whsec_other") });
    expect(await verifySignature("stripe", [secret], other)).toBe(false);
    const unprefixed = delivery(body, { "stripe-signature": signed(NOW_S, "test_secret") });
    expect(await verifySignature("stripe", [secret], unprefixed)).toBe(false);
  });

  it("reads the header's parts", () => {
    expect(parseStripeHeader(`t=12,v1=${"a".repeat(64)}, v1=${"b".repeat(64)},v0=c`)).toEqual({
      timestamp: "12",
      signatures: ["a".repeat(64), "b".repeat(64)],
    });
    expect(parseStripeHeader("v1=short")).toEqual({ signatures: [] });
  });
});

describe("Standard Webhooks", () => {
  // The specification's example.
  const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  const payload = '{"test": 2432232314}';

  it("signs the specification's example as it gives it", () => {
    expect(signStandard([secret], id, new Date(1614265330_000), payload)).toBe(
      "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    );
  });

  it("signs once per secret, each verifiable by the standardwebhooks package", () => {
    const other = newStandardSecret();
    const timestamp = new Date();
    const header = signStandard([secret, other], id, timestamp, payload);
    expect(header.split(" ")).toHaveLength(2);
    const headers = {
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
      "webhook-signature": header,
    };
    expect(new Webhook(secret).verify(payload, headers)).toEqual({ test: 2432232314 });
    expect(new Webhook(other).verify(payload, headers)).toEqual({ test: 2432232314 });
  });

  it("verifies a fresh delivery; refuses a stale one, a wrong one, missing headers", async () => {
    const fresh = new Date();
    const headers = (at: Date, key = secret) => ({
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": signStandard([key], id, at, payload),
    });
    const now = Date.now();
    expect(
      await verifySignature("standard", [secret], delivery(payload, headers(fresh), now)),
    ).toBe(true);
    const stale = new Date(now - 301_000);
    expect(
      await verifySignature("standard", [secret], delivery(payload, headers(stale), now)),
    ).toBe(false);
    const wrong = headers(fresh, newStandardSecret());
    expect(await verifySignature("standard", [secret], delivery(payload, wrong, now))).toBe(false);
    expect(await verifySignature("standard", [secret], delivery(payload, {}, now))).toBe(false);
  });
});

describe("secrets", () => {
  it("generates whsec_ secrets of 32 bytes for standard, hex for github, none for slack and stripe", () => {
    const standard = newHookSecret("standard") ?? "";
    expect(standard).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(atob(standard.slice(6))).toHaveLength(32);
    expect(newHookSecret("github")).toMatch(/^[0-9a-f]{64}$/);
    expect([newHookSecret("slack"), newHookSecret("stripe")]).toEqual([undefined, undefined]);
  });

  it("checks a given Standard Webhooks secret: base64 of 24 to 64 bytes", () => {
    expect(secretProblem("standard", newStandardSecret())).toBe(undefined);
    expect(secretProblem("standard", `whsec_${btoa("x".repeat(23))}`)).toBe(
      "a Standard Webhooks secret holds 24 to 64 bytes",
    );
    expect(secretProblem("standard", "whsec_not base64!")).toBe(
      "a Standard Webhooks secret is `whsec_` followed by base64",
    );
    expect(secretProblem("github", "anything")).toBe(undefined);
  });
});
