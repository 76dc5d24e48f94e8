import { describe, expect, it } from "vitest";
import { call, text } from "./local-worker.ts";
import { persistedWorker } from "./persisted-worker.ts";

interface Prompt {
  instructions: string;
  input: unknown[];
  tools: unknown[];
  parallel_tool_calls: boolean;
}

const { base, restart } = persistedWorker("spindle-e2e-");

const newThreadId = () => `e2e_${crypto.randomUUID().replaceAll("-", "")}`;

async function runTurn(id: string, input: string): Promise<{ status: string; items: unknown[] }> {
  return JSON.parse(await text(await call(base(), "POST", `/v1/threads/${id}/turns`, { input })));
}

const readPrompt = async (id: string) =>
  text(await call(base(), "GET", `/v1/threads/${id}/prompt`));

describe("the worker over a loopback socket", () => {
  it("a restart on the same storage serves the same prompt bytes, and the next turn extends them", async () => {
    const id = newThreadId();
    await text(await call(base(), "POST", "/v1/threads", { id, cwd: "/repo" }), 201);
    const first = await runTurn(id, "first question");
    expect(first.status).toBe("completed");
    const promptBefore = await readPrompt(id);
    const historyBefore = await text(
      await call(base(), "GET", `/v1/threads/${id}/history?limit=100`),
    );

    await restart();

    const promptAfter = await readPrompt(id);
    expect(promptAfter).toBe(promptBefore);
    const historyAfter = await text(
      await call(base(), "GET", `/v1/threads/${id}/history?limit=100`),
    );
    expect(historyAfter).toBe(historyBefore);

    const second = await runTurn(id, "second question");
    expect(second.status).toBe("completed");
    const before = JSON.parse(promptBefore) as Prompt;
    const next = JSON.parse(await readPrompt(id)) as Prompt;
    expect(next.instructions).toBe(before.instructions);
    // The request after turn 2 starts with every byte of the one after turn 1 (cache prefix).
    const beforeInput = JSON.stringify(before.input);
    const nextInput = JSON.stringify(next.input);
    expect(before.input.length).toBeGreaterThan(0);
    expect(next.input.length).toBeGreaterThan(before.input.length);
    expect(nextInput.startsWith(`${beforeInput.slice(0, -1)},`)).toBe(true);

    const thread = JSON.parse(await text(await call(base(), "GET", `/v1/threads/${id}`)));
    expect(thread).toMatchObject({ object: "thread", id, status: "idle", turn_count: 2 });
  });

  it("a request without a key, or with a wrong key, is a 401 problem over the socket", async () => {
    const missing = await call(base(), "GET", "/v1/threads/t1", undefined, null);
    expect(missing.status).toBe(401);
    expect(missing.headers.get("content-type")).toBe("application/problem+json");
    expect(missing.headers.get("www-authenticate")).toBe('Bearer realm="spindle"');
    expect(await missing.json()).toMatchObject({ status: 401, code: "unauthorized" });

    const wrong = await call(base(), "POST", "/v1/threads", { id: "nope" }, "sk-not-a-key");
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("content-type")).toBe("application/problem+json");
    expect(await wrong.json()).toMatchObject({
      status: 401,
      code: "unauthorized",
      detail: "The API key is not valid.",
    });
  });
});
