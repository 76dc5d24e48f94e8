import { describe, expect, it } from "vitest";
import {
  DeliveryBodyError,
  dedupKeyOf,
  passesFilter,
  readDelivery,
} from "../../../shared/webhooks/index.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const headers = (values: Record<string, string>) => (name: string) => values[name];

function refusal(run: () => unknown): string {
  try {
    run();
    return "read";
  } catch (err) {
    return err instanceof DeliveryBodyError ? err.message : "threw";
  }
}

describe("reading a verified delivery, as each scheme sends it", () => {
  it("Standard Webhooks: the id is webhook-id, the event the body's type", () => {
    const read = readDelivery(
      "standard",
      bytes('{"type":"invoice.paid","data":{"id":"in_1"}}'),
      headers({ "webhook-id": "msg_1" }),
    );
    expect(read).toEqual({
      kind: "delivery",
      deliveryId: "msg_1",
      event: "invoice.paid",
      body: { type: "invoice.paid", data: { id: "in_1" } },
    });
  });

  it("GitHub: X-GitHub-Delivery and X-GitHub-Event, JSON or a form's payload; ping is ignored", () => {
    const json = readDelivery(
      "github",
      bytes('{"action":"created","issue":{"number":7},"comment":{"id":1}}'),
      headers({ "x-github-delivery": "guid-1", "x-github-event": "issue_comment" }),
    );
    expect(json).toEqual({
      kind: "delivery",
      deliveryId: "guid-1",
      event: "issue_comment",
      action: "created",
      body: { action: "created", issue: { number: 7 }, comment: { id: 1 } },
    });
    const form = readDelivery(
      "github",
      bytes(`payload=${encodeURIComponent('{"zen":"Keep it logically awesome.","hook_id":1}')}`),
      headers({
        "x-github-delivery": "guid-2",
        "x-github-event": "ping",
        "content-type": "application/x-www-form-urlencoded",
      }),
    );
    expect(form).toEqual({
      kind: "delivery",
      deliveryId: "guid-2",
      event: "ping",
      body: { zen: "Keep it logically awesome.", hook_id: 1 },
      ignore: "ping",
    });
  });

  it("GitHub: an event label the signed body contradicts is refused; an unknown one is taken", () => {
    const read = (event: string, body: unknown) =>
      readDelivery(
        "github",
        bytes(JSON.stringify(body)),
        headers({ "x-github-delivery": "guid", "x-github-event": event }),
      );
    const ping = { zen: "Design for failure.", hook_id: 1 };
    const comment = { action: "created", issue: { number: 1 }, comment: { id: 2 } };
    expect(() => read("issue_comment", ping)).toThrow(DeliveryBodyError);
    expect(() => read("issues", comment)).toThrow(/not a `issues` event/);
    expect(() => read("push", comment)).toThrow(DeliveryBodyError);
    expect(read("issue_comment", comment)).toMatchObject({ event: "issue_comment" });
    expect(read("issues", { action: "opened", issue: { number: 1 } })).toMatchObject({
      event: "issues",
    });
    expect(read("star", comment)).toMatchObject({ event: "star" });
  });

  it("the dedup key: the delivery id, or the body's SHA-256", () => {
    const body = bytes("{}");
    expect(dedupKeyOf("delivery_id", { deliveryId: "d-1" }, body)).toBe("d-1");
    expect(dedupKeyOf("body", { deliveryId: "d-1" }, body)).toBe(
      "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
    );
    expect(dedupKeyOf("body", { deliveryId: "d-2" }, body)).toBe(
      dedupKeyOf("body", { deliveryId: "d-1" }, body),
    );
  });

  it("Slack: url_verification is a challenge; an event_callback is keyed by event_id; a bot's message is ignored", () => {
    expect(
      readDelivery("slack", bytes('{"type":"url_verification","challenge":"c-1"}'), headers({})),
    ).toEqual({ kind: "challenge", challenge: "c-1" });
    const event = { type: "event_callback", event_id: "Ev1", event: { type: "app_mention" } };
    expect(readDelivery("slack", bytes(JSON.stringify(event)), headers({}))).toEqual({
      kind: "delivery",
      deliveryId: "Ev1",
      event: "app_mention",
      body: event,
    });
    const bot = { ...event, event: { type: "message", bot_id: "B1" } };
    expect(readDelivery("slack", bytes(JSON.stringify(bot)), headers({}))).toMatchObject({
      event: "message",
      ignore: "bot_message",
    });
  });

  it("Slack: a slash command is a form keyed by trigger_id; interactivity is a form's JSON payload", () => {
    const form = { "content-type": "application/x-www-form-urlencoded" };
    expect(
      readDelivery("slack", bytes("command=%2Fdeploy&text=now&trigger_id=t.1"), headers(form)),
    ).toEqual({
      kind: "delivery",
      deliveryId: "t.1",
      event: "slash_command",
      body: { command: "/deploy", text: "now", trigger_id: "t.1" },
    });
    const payload = encodeURIComponent('{"type":"block_actions","trigger_id":"t.2"}');
    expect(readDelivery("slack", bytes(`payload=${payload}`), headers(form))).toEqual({
      kind: "delivery",
      deliveryId: "t.2",
      event: "block_actions",
      body: { type: "block_actions", trigger_id: "t.2" },
    });
  });

  it("Slack without an id: the body's digest, the same for the same body", () => {
    const read = readDelivery("slack", bytes('{"type":"app_rate_limited"}'), headers({}));
    expect(read).toMatchObject({ deliveryId: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
    expect(readDelivery("slack", bytes('{"type":"app_rate_limited"}'), headers({}))).toEqual(read);
  });

  it("Stripe: the event's id and type", () => {
    expect(
      readDelivery("stripe", bytes('{"id":"evt_1","type":"charge.succeeded"}'), headers({})),
    ).toEqual({
      kind: "delivery",
      deliveryId: "evt_1",
      event: "charge.succeeded",
      body: { id: "evt_1", type: "charge.succeeded" },
    });
  });

  it("refuses a body that is not what the scheme sends", () => {
    expect([
      refusal(() => readDelivery("standard", bytes("not json"), headers({ "webhook-id": "m" }))),
      refusal(() => readDelivery("standard", bytes("[1]"), headers({ "webhook-id": "m" }))),
      refusal(() => readDelivery("github", bytes("{}"), headers({}))),
      refusal(() => readDelivery("stripe", bytes('{"type":"x"}'), headers({}))),
      refusal(() => readDelivery("slack", bytes('{"type":"event_callback"}'), headers({}))),
      refusal(() => readDelivery("stripe", new Uint8Array([0xff, 0xfe]), headers({}))),
    ]).toEqual([
      "The body is not JSON (or nests deeper than 64 levels).",
      "The body is not a JSON object.",
      "A GitHub delivery has an `X-GitHub-Delivery` header.",
      "A Stripe event has an `id`.",
      "An `event_callback` has an `event_id`.",
      "The body is not UTF-8.",
    ]);
  });

  it("keeps a very long sender id as its digest", () => {
    const read = readDelivery("standard", bytes("{}"), headers({ "webhook-id": "m".repeat(300) }));
    expect(read).toMatchObject({ deliveryId: expect.stringMatching(/^sha256:/) });
  });
});

describe("the events filter", () => {
  it("passes everything without one; else the event, or GitHub's event.action", () => {
    const comment = { event: "issue_comment", action: "created" };
    expect(passesFilter(null, comment)).toBe(true);
    expect(passesFilter(["issue_comment"], comment)).toBe(true);
    expect(passesFilter(["issue_comment.created"], comment)).toBe(true);
    expect(passesFilter(["issue_comment.deleted", "push"], comment)).toBe(false);
    expect(passesFilter(["push"], { event: null })).toBe(false);
  });
});
