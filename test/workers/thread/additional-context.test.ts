/**
 * A turn's `additional_context` over HTTP: validated at the edge, sent as `<external_{key}>`
 * user messages before the input, carried by a queued turn, and shown by `GET …/prompt`.
 */
import { describe, expect, it, vi } from "vitest";
import { api, json, newThreadId, untilRunning } from "../helpers/api.ts";

interface Item {
  type: string;
  role?: string;
  content?: { type: string; text?: string }[];
}
interface Turn {
  id: string;
  status: string;
  items: Item[];
}

const textsOf = (items: readonly Item[]) =>
  items.flatMap((item) => (item.content ?? []).map((part) => part.text ?? ""));

async function newThread(): Promise<string> {
  const id = newThreadId();
  await json(await api("POST", "/v1/threads", { id }), 201);
  return id;
}

describe("additional_context of a turn", () => {
  it("is sent before the input, once while it is unchanged, and the prompt shows it", async () => {
    const id = await newThread();
    const additional = { ticket: "ENG-42 is open", browser_info: "tab one" };
    const first = await json<Turn>(
      await api("POST", `/v1/threads/${id}/turns`, { input: "hi", additional_context: additional }),
    );
    const sent = (items: readonly Item[]) =>
      textsOf(items).filter((t) => !t.startsWith("<permissions") && !t.startsWith("<environment"));
    expect(sent(first.items).slice(0, 3)).toEqual([
      "<external_browser_info>tab one</external_browser_info>",
      "<external_ticket>ENG-42 is open</external_ticket>",
      "hi",
    ]);
    const second = await json<Turn>(
      await api("POST", `/v1/threads/${id}/turns`, {
        input: "again",
        additional_context: additional,
      }),
    );
    expect(textsOf(second.items)[0]).toBe("again");
    const prompt = await json<{ input: Item[] }>(await api("GET", `/v1/threads/${id}/prompt`));
    expect(textsOf(prompt.input).filter((t) => t.startsWith("<external_"))).toHaveLength(2);
  });

  it("travels with a queued turn", async () => {
    const id = await newThread();
    const slow = api("POST", `/v1/threads/${id}/turns`, { input: "/slow 200 first" });
    await untilRunning(id);
    const queued = await json<Turn>(
      await api("POST", `/v1/threads/${id}/turns`, {
        input: "queued",
        on_busy: "queue",
        additional_context: { note: "from the queue" },
      }),
      202,
    );
    await json(await slow);
    const ran = await vi.waitFor(
      async () => {
        const turn = await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${queued.id}`));
        expect(turn.status).toBe("completed");
        return turn;
      },
      { timeout: 5_000, interval: 10 },
    );
    expect(textsOf(ran.items)).toContain("<external_note>from the queue</external_note>");
  });

  it("refuses a key outside Codex's grammar and more than 32 entries, naming the path", async () => {
    const id = await newThread();
    const bad = await api("POST", `/v1/threads/${id}/turns`, {
      input: "hi",
      additional_context: { "x>y": "v" },
    });
    expect(await json(bad, 400)).toMatchObject({
      code: "invalid_request",
      errors: [{ path: expect.stringMatching(/^\/additional_context/) }],
    });
    const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, "v"]));
    const tooMany = await api("POST", `/v1/threads/${id}/turns`, {
      input: "hi",
      additional_context: many,
    });
    expect(await json(tooMany, 400)).toMatchObject({ code: "invalid_request" });
  });
});
