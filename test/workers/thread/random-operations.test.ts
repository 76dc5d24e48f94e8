import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import fc from "fast-check";
import { afterEach, describe, expect, it, type MockInstance, vi } from "vitest";
import {
  CODEX_FIXTURES,
  type CodexFixture,
  DEFAULT_CONFIG,
  jsonl,
} from "../../fixtures/codex-rollouts.ts";
import { MCP_TOKEN, testMcpServer } from "../../helpers/mcp-server.ts";
import {
  api,
  DEV_KEY,
  importRollout,
  json,
  newThreadId,
  readSse,
  type SseFrame,
  threadStub,
} from "../helpers/api.ts";
import { answerEvents, requestJson, responsesStream } from "../helpers/openai.ts";
import { checkThreadRollout } from "../helpers/rollout.ts";
import type { TestThread } from "../worker.ts";

/*
 * Model-based durability test: random sequences of the operations a client and the platform can
 * mix (turns with overrides, long inputs, tool calls and their outputs, MCP server tool calls
 * run in the turn or approved, rollbacks, compactions,
 * injects, forks and their deletion, export + import, imports of Codex rollouts of every shape (also as the thread
 * the sequence starts from), evictions, instances lost mid-turn, turns that interrupt, steer
 * or queue behind a running one, interrupted paused turns, delete and re-create, history read in
 * pages, R2 outages, flush alarms, restores from R2, keyed turns retried), checked after every step against the
 * invariants of design §10: the stored rollout is whole, the prompt never holds a call without
 * its output, a reload is exact, the checkpoint is what its lines replay to, and lines not yet in
 * R2 always have an alarm that will flush them. Forks, which borrow the thread's segments, read
 * as they were made whatever becomes of it; once it and its forks are deleted, no object of any
 * of them is left in R2.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

type Inspect = Awaited<ReturnType<TestThread["inspectForTesting"]>>;
interface Item {
  type: string;
  call_id?: string;
  content?: { text?: string }[];
}

interface Model {
  /** The paused turn waiting for a tool output. */
  pending: { turn: string; call: string } | undefined;
  r2Down: boolean;
  /** The last keyed request (a turn or a compaction) and the turn it answered with. */
  keyed: { key: string; path: "turns" | "compact"; body: unknown; turn: string } | undefined;
  /** Forks made so far and not deleted, with their rollouts as they were made. */
  forks: { id: string; rollout: string }[];
}

interface Real {
  id: string;
  /** The spy that makes R2 puts fail while R2 is "down". */
  outage: MockInstance | undefined;
}

const stub = (r: Real) => threadStub(r.id);
async function inspect(r: Real) {
  const state = (await stub(r).inspectForTesting()) as Inspect;
  if (state === undefined) throw new Error(`thread ${r.id} does not exist`);
  return state;
}
/**
 * The engine state a reload must reproduce. `historyVersion` is left out: after a reload it
 * counts rewrites from the newest compaction (as Codex resumes), so it differs once two
 * compactions happened; history cursors carry the rollout's own rewrite count instead.
 */
async function reloadable(r: Real) {
  const { history, ...rest } = await inspect(r);
  const { historyVersion: _, ...kept } = history;
  return { ...rest, history: kept };
}
const promptText = async (r: Real) => (await api("GET", `/v1/threads/${r.id}/prompt`)).text();
const rolloutText = async (id: string) => (await api("GET", `/v1/threads/${id}/rollout`)).text();

/** Every fork still reads as it was made, whatever became of its source (or of other forks). */
async function checkForks(m: Model): Promise<void> {
  for (const fork of m.forks) expect(await rolloutText(fork.id)).toBe(fork.rollout);
}
const threadText = async (r: Real) => (await api("GET", `/v1/threads/${r.id}`)).text();

const keyedRequest = (r: Real, key: string, path: "turns" | "compact", body: unknown) =>
  api("POST", `/v1/threads/${r.id}/${path}`, body, DEV_KEY, { "idempotency-key": key });

async function turnStatus(r: Real, turnId: string): Promise<string> {
  const turn = await json<{ status: string }>(
    await api("GET", `/v1/threads/${r.id}/turns/${turnId}`),
  );
  return turn.status;
}

/** The turn's status once it no longer runs or waits in the queue. */
async function settled(r: Real, turnId: string): Promise<string> {
  return vi.waitFor(
    async () => {
      const status = await turnStatus(r, turnId);
      expect(status).not.toBe("in_progress");
      return status;
    },
    { timeout: 2_000, interval: 5 },
  );
}

const LOOKUP = { name: "lookup", description: "find things" };

async function createThread(id: string): Promise<void> {
  await json(await api("POST", "/v1/threads", { id, cwd: "/repo", tools: [LOOKUP] }), 201);
}

/**
 * A thread imported from a Codex rollout, whose client declares its tool on the first turn.
 * Rollouts whose warnings come from the world-state replay are left out: a compaction makes
 * those moot, so a restore after one rightly reports fewer warnings than the import did.
 */
async function importThread(id: string, fixture: CodexFixture): Promise<void> {
  await json(await importRollout(id, jsonl(fixture.lines)), 201);
  const first = await api("POST", `/v1/threads/${id}/turns`, {
    input: "carry on",
    overrides: { tools: [LOOKUP] },
  });
  expect((await json<{ status: string }>(first)).status).toBe("completed");
}

const STARTING_FIXTURES = CODEX_FIXTURES.filter((f) =>
  f.expected.warnings.every((w) => w.code !== "rollout_repaired"),
);

/** The turn a request answers ended with `status` (no turn waits for outputs); then the invariants. */
async function expectEndedTurn(m: Model, r: Real, res: Promise<Response>, status: string) {
  const turn = await json<{ status: string }>(await res);
  expect(turn.status).toBe(status);
  m.pending = undefined;
  await checkInvariants(r);
}

/** Longer than a SQLite row part: stored in parts, read back whole. */
const LONG_INPUT_CHARS = 600_000;

/**
 * The MCP server of the sequences (the SDK's, `test/helpers/mcp-server.ts`), registered for the
 * local tenant as `MCP_LABEL`: `echo` runs without asking, `chart` waits for an approval.
 */
const MCP_URL = "http://127.0.0.1:9/random-mcp";
const MCP_LABEL = "random-docs";
const mcpServer = testMcpServer(MCP_URL);

async function registerMcpServer(): Promise<void> {
  const res = await api("POST", "/v1/mcp-servers", {
    label: MCP_LABEL,
    url: MCP_URL,
    headers: { authorization: `Bearer ${MCP_TOKEN}` },
    require_approval: { never: { tool_names: ["echo"] } },
  });
  // Registered by an earlier run of the property in this file's storage: the same server.
  if (res.status !== 409) await json(res, 201);
}

/**
 * The providers' test models (vitest.workers.config.ts), answered by `remoteModel` below, each
 * with the longest prompt (in characters) a turn on it is given: their windows are small.
 */
const REMOTE_MODELS: Readonly<Record<string, number>> = {
  "gpt-test": 200_000,
  "chat-test": 50_000,
  "claude-test": 200_000,
};
const isRemote = (model: string | undefined) => model !== undefined && model in REMOTE_MODELS;

/** The model to run on for what only the local models do (`/call`, `/slow`, long inputs). */
async function localModel(r: Real): Promise<{ model?: string }> {
  const { config } = JSON.parse(await threadText(r)) as { config: { model: string } };
  return isRemote(config.model) ? { model: "spindle-local" } : {};
}

/**
 * The model a long input runs on: only `spindle-local`'s window fits it (on a smaller one the
 * turn is refused with `context_window_exceeded`).
 */
async function largeWindowModel(r: Real): Promise<{ model?: string }> {
  const { config } = JSON.parse(await threadText(r)) as { config: { model: string } };
  return config.model === "spindle-local" ? {} : { model: "spindle-local" };
}

/**
 * Answers the providers' requests (vitest.workers.config.ts points them at openai.test,
 * chat.test and anthropic.test) as each wire streams them: one message naming how many items,
 * messages or turns the request held.
 */
function remoteModel(): MockInstance {
  let served = 0;
  const sse = (frames: string[]) =>
    new Response(frames.join(""), { headers: { "content-type": "text/event-stream" } });
  return vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url.startsWith(MCP_URL)) return mcpServer.fetch(new Request(input, init));
    served += 1;
    if (url.startsWith("https://openai.test/")) {
      const request = await requestJson<{ input: unknown[] }>(init);
      const text = `Upstream answer ${served} to ${request.input.length} items`;
      const body = responsesStream(answerEvents(text, `msg_up_${served}`));
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    }
    if (url.startsWith("https://chat.test/")) {
      const request = await requestJson<{ messages: unknown[] }>(init);
      const text = `Chat answer ${served} to ${request.messages.length} messages`;
      const chunk = (delta: object, finish: string | null) =>
        `data: ${JSON.stringify({ choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      return sse([
        chunk({ role: "assistant", content: text }, null),
        chunk({}, "stop"),
        "data: [DONE]\n\n",
      ]);
    }
    if (url.startsWith("https://anthropic.test/")) {
      const request = await requestJson<{ messages: unknown[] }>(init);
      const text = `Claude answer ${served} to ${request.messages.length} messages`;
      const event = (type: string, data: object) =>
        `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
      const usage = {
        input_tokens: 10,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
      };
      return sse([
        event("message_start", {
          message: {
            id: `msg_${served}`,
            role: "assistant",
            content: [],
            usage: { ...usage, output_tokens: 1 },
          },
        }),
        event("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
        event("content_block_delta", { index: 0, delta: { type: "text_delta", text } }),
        event("content_block_stop", { index: 0 }),
        event("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 5 } }),
        event("message_stop", {}),
      ]);
    }
    throw new Error(`unexpected fetch ${url}`);
  });
}

/** What must hold after every step, whatever came before. */
async function checkInvariants(r: Real): Promise<void> {
  const state = await inspect(r);
  const rollout = await checkThreadRollout(r.id);
  expect(rollout.errors).toEqual([]);
  expect(rollout.lines).toHaveLength(state.lastSeq);

  // Every call in the prompt is followed by its output, and every output answers a call before it.
  const { input } = JSON.parse(await promptText(r)) as { input: Item[] };
  const open = new Set<string>();
  for (const item of input) {
    if (item.type === "function_call" && item.call_id) open.add(item.call_id);
    if (item.type === "function_call_output") {
      expect(open.has(item.call_id ?? "")).toBe(true);
      open.delete(item.call_id ?? "");
    }
  }
  expect([...open]).toEqual([]);

  // The checkpoint in memory (extended from lines kept in memory) is what its stored lines replay to.
  const replay = (await stub(r).checkpointReplayForTesting()) as Awaited<
    ReturnType<TestThread["checkpointReplayForTesting"]>
  >;
  if (replay) expect(replay.checkpoint).toEqual(replay.replayed);
}

/** A turn with a plain message, sometimes changing the working directory or the model. */
class TurnCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly text: string,
    readonly overrides: { cwd?: string; model?: string } | undefined,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    let overrides = this.overrides;
    const limit = overrides?.model === undefined ? undefined : REMOTE_MODELS[overrides.model];
    // The remote models' windows are small: long inputs and long histories stay on a local model.
    if (
      limit !== undefined &&
      (this.text.length > LONG_INPUT_CHARS || (await promptText(r)).length > limit)
    ) {
      const { model: _, ...rest } = overrides ?? {};
      overrides = rest;
    }
    if (this.text.length > LONG_INPUT_CHARS) {
      const { model: _, ...rest } = overrides ?? {};
      overrides = { ...rest, ...(await largeWindowModel(r)) };
    }
    const turn = await json<{ status: string }>(
      await api("POST", `/v1/threads/${r.id}/turns`, {
        input: this.text,
        ...(overrides ? { overrides } : {}),
      }),
    );
    expect(turn.status).toBe("completed");
    // The message is in the next prompt (a compaction may only run before a turn).
    const { input } = JSON.parse(await promptText(r)) as { input: Item[] };
    expect(input.some((i) => i.content?.some((c) => c.text === this.text))).toBe(true);
    // A new turn leaves an unanswered call behind (paired with "aborted" in prompts).
    m.pending = undefined;
    await checkInvariants(r);
  }
  toString = () => {
    const text =
      this.text.length > 40 ? `${this.text.slice(0, 4)}… (${this.text.length} chars)` : this.text;
    return `turn(${JSON.stringify(text)}, ${JSON.stringify(this.overrides)})`;
  };
}

/** A turn in which the model calls the client's tool and pauses. */
class CallCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly n: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const turn = await json<{ id: string; status: string; pending_calls: Item[] }>(
      await api("POST", `/v1/threads/${r.id}/turns`, {
        input: `/call lookup {"n":${this.n}}`,
        // Only the local models call tools on request.
        overrides: await localModel(r),
      }),
    );
    expect(turn.status).toBe("requires_action");
    const call = turn.pending_calls[0]?.call_id;
    expect(call).toBeTypeOf("string");
    m.pending = { turn: turn.id, call: call as string };
    await checkInvariants(r);
  }
  toString = () => `call(${this.n})`;
}

/**
 * A turn that calls a tool of the MCP server (the thread names it from then on): `echo` runs
 * in the turn, `chart` pauses for an approval that is given. Either way the server runs the call
 * exactly once and the turn completes with no client output.
 */
class McpCallCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly tool: "echo" | "chart",
    readonly n: number,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const before = mcpServer.calls.get(this.tool) ?? 0;
    const args = this.tool === "echo" ? `{"text":"n${this.n}"}` : "{}";
    const turn = await json<{
      id: string;
      status: string;
      pending_approvals?: { id: string }[];
    }>(
      await api("POST", `/v1/threads/${r.id}/turns`, {
        input: `/call mcp__${MCP_LABEL}__${this.tool} ${args}`,
        overrides: { ...(await localModel(r)), mcp_servers: [MCP_LABEL] },
      }),
    );
    m.pending = undefined;
    if (this.tool === "chart") {
      expect(turn.status).toBe("requires_action");
      expect(mcpServer.calls.get(this.tool) ?? 0).toBe(before);
      const approval = turn.pending_approvals?.[0]?.id;
      const outputs = api("POST", `/v1/threads/${r.id}/turns/${turn.id}/outputs`, {
        items: [{ type: "mcp_approval_response", approval_request_id: approval, approve: true }],
      });
      await expectEndedTurn(m, r, outputs, "completed");
    } else {
      expect(turn.status).toBe("completed");
      await checkInvariants(r);
    }
    expect(mcpServer.calls.get(this.tool)).toBe(before + 1);
  }
  toString = () => `mcp call(${this.tool}, ${this.n})`;
}

/** The client answers the paused turn's call; the turn completes. */
class OutputCommand implements fc.AsyncCommand<Model, Real> {
  /** Longer than the thread's truncation policy keeps: history holds it truncated. */
  constructor(readonly long: boolean) {}
  check = (m: Readonly<Model>) => m.pending !== undefined;
  async run(m: Model, r: Real) {
    const pending = m.pending as NonNullable<Model["pending"]>;
    const output = this.long ? `found: ${"row ".repeat(100_000)}` : "found it";
    const outputs = api("POST", `/v1/threads/${r.id}/turns/${pending.turn}/outputs`, {
      items: [{ type: "function_call_output", call_id: pending.call, output }],
    });
    await expectEndedTurn(m, r, outputs, "completed");
  }
  toString = () => (this.long ? "output (long)" : "output");
}

class RollbackCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly turns: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const before = await promptText(r);
    const res = await api("POST", `/v1/threads/${r.id}/rollback`, { turns: this.turns });
    if (res.status === 200) {
      m.pending = undefined;
    } else {
      // Only a rollback past the first user turn may be refused, and it must change nothing.
      expect(res.status).toBe(400);
      expect(((await res.json()) as { code: string }).code).toBe("invalid_request");
      expect(await promptText(r)).toBe(before);
    }
    await checkInvariants(r);
  }
  toString = () => `rollback(${this.turns})`;
}

/** User messages recorded without a turn. */
class InjectCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(_m: Model, r: Real) {
    await json(await api("POST", `/v1/threads/${r.id}/inject`, { text: "noted" }));
    await checkInvariants(r);
  }
  toString = () => "inject";
}

class CompactCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    await expectEndedTurn(m, r, api("POST", `/v1/threads/${r.id}/compact`), "completed");
  }
  toString = () => "compact";
}

/** The platform drops the instance; the next request reloads exactly what was there. */
class EvictCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(_m: Model, r: Real) {
    const prompt = await promptText(r);
    const thread = await threadText(r);
    const { flushedThrough, checkpointSeq, ...state } = await reloadable(r);
    await evictDurableObject(stub(r));
    expect(await promptText(r)).toBe(prompt);
    expect(await threadText(r)).toBe(thread);
    const after = await reloadable(r);
    const { flushedThrough: flushedAfter, checkpointSeq: checkpointAfter, ...reloaded } = after;
    expect(reloaded).toEqual(state);
    // The flush alarm may have run meanwhile (it fires on its own); neither ever goes back.
    expect(flushedAfter).toBeGreaterThanOrEqual(flushedThrough);
    expect(checkpointAfter ?? 0).toBeGreaterThanOrEqual(checkpointSeq ?? 0);
    await checkInvariants(r);
  }
  toString = () => "evict";
}

/** R2 starts or stops failing every put. */
class OutageCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    if (m.r2Down) {
      r.outage?.mockRestore();
      r.outage = undefined;
    } else {
      r.outage = vi.spyOn(env.ROLLOUT, "put").mockRejectedValue(new Error("r2 down"));
    }
    m.r2Down = !m.r2Down;
  }
  toString = () => "toggle R2 outage";
}

/** The flush alarm fires. Lines not in R2 must always have one pending. */
class AlarmCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    const before = await inspect(r);
    const ran = await runDurableObjectAlarm(stub(r));
    if (before.flushedThrough < before.lastSeq && !ran) {
      // The alarm fired on its own between the two reads (a flush delay elapsed): by now it has
      // flushed, or it scheduled its retry.
      const now = await inspect(r);
      if (now.flushedThrough < now.lastSeq) expect(await runDurableObjectAlarm(stub(r))).toBe(true);
    }
    const after = await inspect(r);
    if (!m.r2Down) expect(after.flushedThrough).toBe(after.lastSeq);
    else expect(after.flushedThrough).toBe(before.flushedThrough);
    await checkInvariants(r);
  }
  toString = () => "alarm";
}

/**
 * `POST …/restore` (R2 segments plus the SQLite lines R2 lacks, when R2 answers): the rebuilt
 * thread is the same thread, and lines not yet in R2 still get there.
 */
class RestoreCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly flushFirst: boolean) {}
  check = (m: Readonly<Model>) => !m.r2Down;
  async run(_m: Model, r: Real) {
    if (this.flushFirst) await runDurableObjectAlarm(stub(r));
    const prompt = await promptText(r);
    const thread = await threadText(r);
    const { config, history, previousTurnSettings, lastSeq } = await reloadable(r);
    await json(await api("POST", `/v1/threads/${r.id}/restore`));
    expect(await promptText(r)).toBe(prompt);
    expect(await threadText(r)).toBe(thread);
    expect(await reloadable(r)).toMatchObject({ config, history, previousTurnSettings, lastSeq });
    await checkInvariants(r);
  }
  toString = () => `restore(${this.flushFirst ? "after a flush" : "with unflushed lines"})`;
}

/**
 * A fork of every ended turn is, to the model, the same thread. `restoreUnflushed`: restored
 * once before its first line reached R2 (it borrows the segments after that line), then after.
 */
class ForkCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly restoreUnflushed: boolean) {}
  // A paused turn has not ended, so the fork leaves it out.
  check = (m: Readonly<Model>) => m.pending === undefined;
  async run(m: Model, r: Real) {
    const fork: Real = { id: newThreadId(), outage: undefined };
    await json(await api("POST", `/v1/threads/${r.id}/fork`, { id: fork.id }), 201);
    expect(await promptText(fork)).toBe(await promptText(r));
    const rollout = await rolloutText(fork.id);
    // The fork is a thread like any other: it reloads exactly, from SQLite or from R2.
    await new EvictCommand().run(m, fork);
    if (this.restoreUnflushed && !m.r2Down) await new RestoreCommand(false).run(m, fork);
    await new RestoreCommand(true).run(m, fork);
    expect(await rolloutText(fork.id)).toBe(rollout);
    m.forks.push({ id: fork.id, rollout });
  }
  toString = () => `fork${this.restoreUnflushed ? " (restored before its first flush)" : ""}`;
}

/** Delete the oldest fork: the others, which may borrow the same segments, stay whole. */
class DeleteForkCommand implements fc.AsyncCommand<Model, Real> {
  check = (m: Readonly<Model>) => m.forks.length > 0 && !m.r2Down;
  async run(m: Model) {
    const [oldest] = m.forks.splice(0, 1);
    expect((await api("DELETE", `/v1/threads/${oldest?.id}`)).status).toBe(204);
    await checkForks(m);
  }
  toString = () => "delete a fork";
}

/** Export, then import as a new thread: the same rollout lines and the same prompt. */
class ExportImportCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    const exported = await (await api("GET", `/v1/threads/${r.id}/rollout`)).text();
    const copy: Real = { id: newThreadId(), outage: undefined };
    const res = await importRollout(copy.id, exported);
    expect(res.status).toBe(201);
    const again = await (await api("GET", `/v1/threads/${copy.id}/rollout`)).text();
    // Every line but the first (session_meta names the new thread) is kept byte for byte.
    expect(again.split("\n").slice(1)).toEqual(exported.split("\n").slice(1));
    expect(await promptText(copy)).toBe(await promptText(r));
    await new EvictCommand().run(m, copy);
    await new RestoreCommand(true).run(m, copy);
  }
  toString = () => "export + import";
}

/**
 * Import a hand-written Codex rollout (one shape per Codex era) as a new thread: the settings,
 * warnings, turns and origin it must give; then it takes a turn, and reloads and restores exactly.
 */
class CodexImportCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly fixture: CodexFixture) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const copy: Real = { id: newThreadId(), outage: undefined };
    const thread = await json(await importRollout(copy.id, jsonl(this.fixture.lines)), 201);
    const { expected } = this.fixture;
    expect(thread).toMatchObject({
      config: { ...DEFAULT_CONFIG, ...expected.config },
      turn_count: expected.turnCount,
      imported_from: expected.importedFrom,
      warnings: expected.warnings,
    });
    // The model describes the main thread: the copy's commands run against a model of its own.
    const own: Model = { ...m, pending: undefined };
    await new TurnCommand("carry on", undefined).run(own, copy);
    await new EvictCommand().run(own, copy);
    await new RestoreCommand(true).run(own, copy);
    await checkInvariants(r);
  }
  toString = () => `import Codex ${this.fixture.versions}`;
}

type BusyKind = "interrupt" | "steer" | "queue" | "reset";

/**
 * A slow turn, and while it runs: a turn that interrupts it, input steered into it, a turn queued
 * behind it, or the instance lost (memory gone, storage kept; the reload settles the cut turn).
 */
class BusyCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: BusyKind) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const post = (body: Record<string, unknown>) => api("POST", `/v1/threads/${r.id}/turns`, body);
    // The turn's own turn.started names it (an automatic compaction may stream first); the
    // client then goes away, and the turn runs on.
    const isTurnStart = (f: SseFrame) =>
      f.event === "turn.started" &&
      (JSON.parse(f.data) as { data: { kind: string } }).data.kind === "turn";
    const head = await readSse(
      await post({
        input: "/slow 150 take your time",
        stream: true,
        overrides: await localModel(r),
      }),
      (frames) => frames.some(isTurnStart),
    );
    const running = (JSON.parse(head.find(isTurnStart)?.data ?? "{}") as { turn_id: string })
      .turn_id;
    m.pending = undefined;
    switch (this.kind) {
      case "interrupt": {
        const next = await json<{ status: string }>(
          await post({ input: "instead", on_busy: "interrupt" }),
        );
        expect(next.status).toBe("completed");
        expect(await turnStatus(r, running)).toBe("interrupted");
        break;
      }
      case "steer":
        await json(await post({ input: "also this", on_busy: "steer", expected_turn_id: running }));
        expect(await settled(r, running)).toBe("completed");
        break;
      case "queue": {
        const queued = await json<{ id: string }>(
          await post({ input: "after", on_busy: "queue" }),
          202,
        );
        expect(await settled(r, running)).toBe("completed");
        expect(await settled(r, queued.id)).toBe("completed");
        break;
      }
      case "reset":
        await runInDurableObject(stub(r), (_i, state) => state.abort("reset for the test")).catch(
          () => undefined,
        );
        // The reload settles the turn the reset cut short.
        expect(JSON.parse(await threadText(r))).toMatchObject({ status: "idle" });
        expect(await turnStatus(r, running)).toBe("interrupted");
        break;
    }
    await checkInvariants(r);
  }
  toString = () => `busy(${this.kind})`;
}

/** The client gives up on its tool call: the paused turn ends as interrupted. */
class InterruptPausedCommand implements fc.AsyncCommand<Model, Real> {
  check = (m: Readonly<Model>) => m.pending !== undefined;
  async run(m: Model, r: Real) {
    const pending = m.pending as NonNullable<Model["pending"]>;
    const interrupt = api("POST", `/v1/threads/${r.id}/turns/${pending.turn}/interrupt`);
    await expectEndedTurn(m, r, interrupt, "interrupted");
  }
  toString = () => "interrupt the paused turn";
}

/**
 * Delete the thread, then create one with the same id: nothing of the old one is left. While R2
 * refuses writes, a thread whose segments forks borrow cannot be deleted (its tombstone is a
 * write): the delete fails and the thread is left as it was.
 */
class DeleteRecreateCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    const before = await promptText(r);
    const deleted = await api("DELETE", `/v1/threads/${r.id}`);
    if (r.outage && deleted.status === 500) {
      const loans = await env.ROLLOUT.list({ prefix: `threads/local/${r.id}/borrowers/` });
      expect(loans.objects.length).toBeGreaterThan(0);
      expect(await promptText(r)).toBe(before);
      await checkInvariants(r);
      return;
    }
    expect(deleted.status).toBe(204);
    await checkForks(m);
    await createThread(r.id);
    const thread = JSON.parse(await threadText(r)) as { turn_count: number; status: string };
    expect(thread).toMatchObject({ turn_count: 0, status: "idle" });
    const { input } = JSON.parse(await promptText(r)) as { input: Item[] };
    expect(input).toEqual([]);
    m.pending = undefined;
    m.keyed = undefined;
    await checkInvariants(r);
    await checkForks(m);
  }
  toString = () => "delete + create again";
}

/** A turn sent with an Idempotency-Key, so that `RetryCommand` can send it again. */
class KeyedTurnCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly n: number,
    readonly compaction: boolean,
  ) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const key = `key-${crypto.randomUUID()}`;
    const path = this.compaction ? "compact" : "turns";
    const body = this.compaction ? undefined : { input: `keyed ${this.n}` };
    const turn = await json<{ id: string; status: string }>(await keyedRequest(r, key, path, body));
    expect(turn.status).toBe("completed");
    m.pending = undefined;
    m.keyed = { key, path, body, turn: turn.id };
    await checkInvariants(r);
  }
  toString = () => (this.compaction ? "keyed compaction" : `keyed turn(${this.n})`);
}

/**
 * The client retries the keyed turn or compaction, whatever happened since (evictions, rollbacks,
 * compactions, outages): it gets that turn back, and nothing is recorded.
 */
class RetryCommand implements fc.AsyncCommand<Model, Real> {
  check = (m: Readonly<Model>) => m.keyed !== undefined;
  async run(m: Model, r: Real) {
    const keyed = m.keyed as NonNullable<Model["keyed"]>;
    const before = await inspect(r);
    const retried = await json<{ id: string }>(
      await keyedRequest(r, keyed.key, keyed.path, keyed.body),
    );
    expect(retried.id).toBe(keyed.turn);
    expect(retried).toEqual(
      await json(await api("GET", `/v1/threads/${r.id}/turns/${keyed.turn}`)),
    );
    expect((await inspect(r)).lastSeq).toBe(before.lastSeq);
    await checkInvariants(r);
  }
  toString = () => "retry the keyed request";
}

/** History read page by page through its cursors is history read at once. */
class PagedHistoryCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly limit: number) {}
  check = () => true;
  async run(_m: Model, r: Real) {
    const whole = await json<{ data: unknown[] }>(
      await api("GET", `/v1/threads/${r.id}/history?limit=1000`),
    );
    const paged: unknown[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
      const page: { data: unknown[]; next_cursor: string | null } = await json(
        await api("GET", `/v1/threads/${r.id}/history?limit=${this.limit}${query}`),
      );
      paged.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor !== null);
    expect(paged).toEqual(whole.data);
  }
  toString = () => `history in pages of ${this.limit}`;
}

const commands = [
  fc
    .tuple(
      fc
        .oneof(
          { weight: 9, arbitrary: fc.string({ minLength: 1, maxLength: 12 }) },
          // Longer than a SQLite row part: stored in parts, read back whole.
          {
            weight: 1,
            arbitrary: fc.nat({ max: 9 }).map((n) => `${"x".repeat(LONG_INPUT_CHARS)} ${n}`),
          },
        )
        .filter((s) => s.trim() !== "" && !s.startsWith("/")),
      fc.option(
        fc.oneof(
          fc.constantFrom("/repo", "/repo/app", "/srv").map((cwd) => ({ cwd })),
          fc
            .constantFrom("spindle-local", "spindle-local-lite", ...Object.keys(REMOTE_MODELS))
            .map((model) => ({ model })),
        ),
        { nil: undefined },
      ),
    )
    .map(([text, overrides]) => new TurnCommand(text, overrides)),
  fc.nat({ max: 99 }).map((n) => new CallCommand(n)),
  fc
    .tuple(fc.constantFrom<"echo" | "chart">("echo", "chart"), fc.nat({ max: 99 }))
    .map(([tool, n]) => new McpCallCommand(tool, n)),
  fc.boolean().map((long) => new OutputCommand(long)),
  fc.integer({ min: 1, max: 3 }).map((n) => new RollbackCommand(n)),
  fc.constant(new CompactCommand()),
  fc.constant(new EvictCommand()),
  fc.constant(new OutageCommand()),
  fc.constant(new AlarmCommand()),
  fc.boolean().map((flushFirst) => new RestoreCommand(flushFirst)),
  fc.constant(new InjectCommand()),
  fc.boolean().map((unflushed) => new ForkCommand(unflushed)),
  fc.constant(new DeleteForkCommand()),
  fc.constant(new ExportImportCommand()),
  fc.constantFrom(...CODEX_FIXTURES).map((fixture) => new CodexImportCommand(fixture)),
  fc.constant(new InterruptPausedCommand()),
  fc.constant(new DeleteRecreateCommand()),
  fc.integer({ min: 1, max: 4 }).map((n) => new PagedHistoryCommand(n)),
  fc
    .tuple(fc.nat({ max: 9 }), fc.boolean())
    .map(([n, compaction]) => new KeyedTurnCommand(n, compaction)),
  fc.constant(new RetryCommand()),
  fc
    .constantFrom<BusyKind>("interrupt", "steer", "queue", "reset")
    .map((kind) => new BusyCommand(kind)),
];

describe("random operation sequences", () => {
  it("keep the rollout whole, the prompt paired, reloads exact and unflushed lines scheduled", async () => {
    await registerMcpServer();
    await fc.assert(
      fc.asyncProperty(
        fc.option(fc.constantFrom(...STARTING_FIXTURES), { nil: undefined }),
        fc.commands(commands, { maxCommands: 40, size: "max" }),
        async (fixture, cmds) => {
          const real: Real = { id: newThreadId(), outage: undefined };
          const upstream = remoteModel();
          if (fixture === undefined) await createThread(real.id);
          else await importThread(real.id, fixture);
          const model: Model = { pending: undefined, r2Down: false, keyed: undefined, forks: [] };
          try {
            await fc.asyncModelRun(() => ({ model, real }), cmds);
            real.outage?.mockRestore();
            // Once the thread and its forks are gone, so is every object they wrote or kept.
            await checkForks(model);
            for (const id of [real.id, ...model.forks.map((f) => f.id)]) {
              expect((await api("DELETE", `/v1/threads/${id}`)).status).toBe(204);
            }
            for (const id of [real.id, ...model.forks.map((f) => f.id)]) {
              const left = await env.ROLLOUT.list({ prefix: `threads/local/${id}/` });
              expect(left.objects.map((o) => o.key)).toEqual([]);
            }
          } finally {
            real.outage?.mockRestore();
            upstream.mockRestore();
          }
        },
      ),
      { numRuns: 25 },
    );
  }, 300_000);
});
