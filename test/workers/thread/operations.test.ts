import { evictDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { api, importRollout, json, newThreadId, post, threadStub } from "../helpers/api.ts";
import { checkThreadRollout } from "../helpers/rollout.ts";
import {
  createThread,
  type Item,
  isContext,
  openInput,
  prompt,
  promptText,
  type Turn,
  text,
  turn,
} from "../helpers/turns.ts";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("thread operations", () => {
  it("rollback, then a turn with the same overrides emits the diff once and nothing more", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/a" });
    await turn(id, "one");
    const two = await turn(id, "two", { overrides: { cwd: "/b" } });
    expect(two.items.filter(isContext)).toHaveLength(1);
    const rolled = await json<{ object: string }>(
      await post(`/v1/threads/${id}/rollback`, { turns: 1 }),
    );
    expect(rolled.object).toBe("thread");
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${id}/history?limit=1000`),
    );
    expect(history.data.map(text).some((t) => t === "two")).toBe(false);
    const three = await turn(id, "three", { overrides: { cwd: "/b" } });
    const context = three.items.filter(isContext);
    expect(context).toHaveLength(1);
    expect(text(context[0])).toContain("<cwd>/b</cwd>");
    const four = await turn(id, "four");
    expect(four.items.filter(isContext)).toEqual([]);
  });

  it("fork replays the parent prefix byte-identically and adds only the diff", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    const one = await turn(id, "one");
    const afterOne = await promptText(id);
    const two = await turn(id, "two");
    const full = await promptText(id);

    const forkId = newThreadId();
    const fork = await json<{ id: string; forked_from: string }>(
      await post(`/v1/threads/${id}/fork`, { id: forkId }),
      201,
    );
    expect(fork).toMatchObject({ id: forkId, forked_from: id });
    expect(await promptText(forkId)).toBe(full);

    const early = newThreadId();
    await json(await post(`/v1/threads/${id}/fork`, { id: early, before_turn: two.id }), 201);
    expect(await promptText(early)).toBe(afterOne);
    expect(one.id).not.toBe(two.id);

    const next = await turn(forkId, "in the fork", { overrides: { cwd: "/other" } });
    expect(next.items.filter(isContext)).toHaveLength(1);
    const after = await prompt(forkId);
    expect(JSON.stringify(after.input).startsWith(openInput(JSON.parse(full)))).toBe(true);
  });

  it("compaction replaces history; the next turn re-injects the full context, then prompts are prefix-stable again", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo", agents_md: { directory: "/repo", text: "Be brief." } });
    await turn(id, "one");
    await turn(id, "two");
    const compaction = await json<Turn>(await post(`/v1/threads/${id}/compact`));
    expect(compaction.status).toBe("completed");
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${id}/history?limit=1000`),
    );
    expect(history.data.every((i) => i.type === "message" && i.role === "user")).toBe(true);
    expect(history.data.map(text)).toContain("two");

    const three = await turn(id, "three");
    expect(three.items.filter(isContext).map((i) => i.role)).toEqual(["developer", "user"]);
    const p3 = await prompt(id);
    await turn(id, "four");
    const p4 = await prompt(id);
    expect(JSON.stringify(p4.input).startsWith(openInput(p3))).toBe(true);
  });

  it("history cursors survive a reload after several rewrites, and a rewrite since makes them stale", async () => {
    const id = newThreadId();
    await createThread(id);
    type Page = { data: Item[]; next_cursor: string | null };
    const page = async (cursor?: string, status = 200) =>
      json<Page>(
        await api(
          "GET",
          `/v1/threads/${id}/history?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
        ),
        status,
      );
    // Two compactions: the engine's history version after a reload counts from the newest one
    // only (as Codex resumes), so it differs from the live one.
    for (const input of ["one", "two"]) await turn(id, input);
    expect((await json<Turn>(await post(`/v1/threads/${id}/compact`))).status).toBe("completed");
    for (const input of ["three", "four"]) await turn(id, input);
    expect((await json<Turn>(await post(`/v1/threads/${id}/compact`))).status).toBe("completed");
    for (const input of ["five", "six"]) await turn(id, input);
    const first = await page();
    const cursor = first.next_cursor ?? "";
    expect(cursor).not.toBe("");
    const second = await page(cursor);
    await evictDurableObject(threadStub(id));
    expect(await page(cursor)).toEqual(second);
    expect((await json<Turn>(await post(`/v1/threads/${id}/compact`))).status).toBe("completed");
    const stale = await json<{ code: string }>(
      await api("GET", `/v1/threads/${id}/history?cursor=${encodeURIComponent(cursor)}`),
      400,
    );
    expect(stale.code).toBe("invalid_request");
  });

  it("inject records user messages without a turn", async () => {
    const id = newThreadId();
    await createThread(id);
    await turn(id, "one");
    await json(await post(`/v1/threads/${id}/inject`, { text: "by the way" }));
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${id}/history?limit=1000`),
    );
    expect(text(history.data.at(-1))).toBe("by the way");
    const check = await checkThreadRollout(id);
    const last = check.lines.at(-1) ?? "";
    expect(last).toContain('"by the way"');
    expect(check.lines.filter((l) => l.includes('"type":"turn_context"'))).toHaveLength(1);
  });
});

describe("export and import", () => {
  it("export → import → export is byte-identical apart from the session_meta line", async () => {
    const id = newThreadId();
    await createThread(id, { cwd: "/repo" });
    await turn(id, "one");
    await turn(id, "two", { overrides: { cwd: "/x" } });
    const exported = await (await api("GET", `/v1/threads/${id}/rollout`)).text();
    const copy = newThreadId();
    const imported = await importRollout(copy, exported);
    expect(imported.status).toBe(201);
    const again = await (await api("GET", `/v1/threads/${copy}/rollout`)).text();
    const a = exported.split("\n");
    const b = again.split("\n");
    expect(b.length).toBe(a.length);
    expect(b.slice(1)).toEqual(a.slice(1));
    expect(JSON.parse(b[0] ?? "{}").payload.id).toBe(copy);
    expect(await promptText(copy)).toBe(await promptText(id));
  });

  it("a malformed line is a 400 naming its line; nothing is created", async () => {
    const copy = newThreadId();
    const res = await importRollout(copy, `${sessionMeta()}\n{"not":"a line"}\n`);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "/line/2" }],
    });
    expect((await api("GET", `/v1/threads/${copy}`)).status).toBe(404);
  });

  it("imports a hand-written Codex rollout with a compaction and a rollback and resumes from it", async () => {
    const lines = [
      sessionMeta(),
      ...codexTurn("t1", "first question", "first answer"),
      line("compacted", {
        message: "summary of the start",
        replacement_history: [userItem("first question"), userItem("summary of the start")],
      }),
      ...codexTurn("t2", "second question", "second answer"),
      line("event_msg", { type: "thread_rolled_back", num_turns: 1 }),
      line("something_new", { from: "a newer codex" }),
    ];
    const copy = newThreadId();
    const res = await importRollout(copy, `${lines.join("\n")}\n`);
    expect(res.status).toBe(201);
    const thread = (await res.json()) as {
      config: { model: string; permissions: { sandbox: string }; environments: { cwd: string }[] };
    };
    expect(thread.config.model).toBe("spindle-local");
    expect(thread.config.permissions.sandbox).toBe("read-only");
    expect(thread.config.environments[0]?.cwd).toBe("/repo");
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${copy}/history?limit=1000`),
    );
    expect(history.data.map(text)).toEqual(["first question", "summary of the start"]);
    const next = await turn(copy, "third question");
    expect(next.status).toBe("completed");
    // The compaction cleared the reference: the first turn after import sends the full context.
    expect(next.items.filter(isContext).map((i) => i.role)).toEqual(["developer", "user"]);
    const exported = await (await api("GET", `/v1/threads/${copy}/rollout`)).text();
    expect(exported).toContain('"type":"something_new"');
  });
});

function line(type: string, payload: object): string {
  return JSON.stringify({ timestamp: "2026-01-01T00:00:00.000Z", type, payload });
}
function userItem(text: string) {
  return { type: "message", role: "user", content: [{ type: "input_text", text }] };
}
/** One Codex turn's lines, as Codex writes them (turn_context before the user message). */
function codexTurn(turnId: string, question: string, answer: string): string[] {
  return [
    line("event_msg", { type: "task_started", turn_id: turnId }),
    line("turn_context", {
      turn_id: turnId,
      cwd: "/repo",
      approval_policy: "never",
      sandbox_policy: { mode: "read-only" },
      model: "spindle-local",
      summary: "auto",
    }),
    line("response_item", userItem(question)),
    line("event_msg", { type: "user_message", message: question }),
    line("response_item", {
      type: "message",
      role: "assistant",
      content: [{ type: "output_text", text: answer }],
    }),
    line("event_msg", { type: "task_complete", turn_id: turnId, last_agent_message: answer }),
  ];
}
function sessionMeta(): string {
  return line("session_meta", {
    id: "codex-session",
    timestamp: "2026-01-01T00:00:00.000Z",
    cwd: "/repo",
    originator: "codex_cli_rs",
    cli_version: "0.150.0",
  });
}
