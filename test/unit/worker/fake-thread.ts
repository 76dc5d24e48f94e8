import { createHash } from "node:crypto";
import type { Env } from "../../../env.ts";
import type {
  CompactRequest,
  CreateFromRolloutRequest,
  CreateThreadRequest,
  EventsRequest,
  ExportRequest,
  ForkSourceRequest,
  IdempotencyKey,
  InjectRequest,
  ListHistoryRequest,
  ListResource,
  ListTurnsRequest,
  RollbackRequest,
  RpcFailure,
  RpcResult,
  SharedSegment,
  StartTurnRequest,
  SteerRequest,
  SubmitOutputsRequest,
  ThreadEvent,
  ThreadResource,
  ThreadRpc,
  TurnResource,
  TurnSummary,
} from "../../../shared/api/index.ts";
import { withCacheHitRatio, ZERO_THREAD_USAGE } from "../../../shared/api/index.ts";
import type { Prompt, ResponseItem } from "../../../shared/protocol/index.ts";
import { createApp } from "../../../worker/app.ts";

/**
 * A stand-in for the `THREAD` namespace: `getByName(name)` hands out an in-memory `ThreadRpc`
 * per DO name and records every name and call, so tests see exactly which object the worker
 * addressed. Threads live in a map keyed by DO name, like real DO storage.
 */
export class FakeThreads {
  /** Every name passed to `getByName`, in order. */
  readonly names: string[] = [];
  /** Every RPC call: the DO name, the method and its arguments. */
  readonly calls: { name: string; method: keyof ThreadRpc; args: unknown[] }[] = [];
  readonly threads = new Map<string, ThreadResource>();
  /** Forced answers: a failure result, or an exception to throw (a broken RPC call). */
  readonly failures = new Map<keyof ThreadRpc, RpcFailure | Error>();
  /** What `startTurn` answers with (its status). */
  turnStatus: TurnResource["status"] = "completed";
  /** The body of every event stream the fake answers (`streamTurn`, `events`, `streamOutputs`). */
  eventStream: () => ReadableStream<Uint8Array> = () => ndjson(turnEvents("turn_1", "t1"));
  /** The rollout `exportRollout` and `forkSource` answer, as JSONL. */
  rolloutText = `${rolloutLines.join("\n")}\n`;
  /** The segments `forkSource` lends a borrower, if any. */
  sharedSegments: SharedSegment[] | undefined;
  /** The `missingLines` `exportRollout` answers with. */
  missingLines = 0;
  /** What `createFromRollout` read from `lines`, by DO name. */
  readonly received = new Map<string, string>();

  readonly namespace = {
    getByName: (name: string): ThreadRpc => {
      this.names.push(name);
      return this.stub(name);
    },
  };

  env(
    vars: Partial<
      Pick<Env, "SPINDLE_ENV" | "SPINDLE_API_KEYS" | "SPINDLE_ADMIN_KEYS" | "SPINDLE_CORS_ORIGINS">
    > = {},
  ): Env {
    return { THREAD: this.namespace, ROLLOUT: {}, ...vars } as unknown as Env;
  }

  private stub(name: string): ThreadRpc {
    const call = async <T>(
      method: keyof ThreadRpc,
      args: unknown[],
      answer: () => RpcResult<T>,
    ): Promise<RpcResult<T>> => {
      this.calls.push({ name, method, args });
      const forced = this.failures.get(method);
      if (forced instanceof Error) throw forced;
      if (forced !== undefined) return { ok: false, error: forced };
      return answer();
    };
    const existing = (): RpcResult<ThreadResource> => {
      const thread = this.threads.get(name);
      return thread === undefined
        ? { ok: false, error: { code: "not_found", detail: `No thread ${name}.` } }
        : { ok: true, value: thread };
    };
    return {
      createThread: (req: CreateThreadRequest) =>
        call("createThread", [req], () => {
          if (this.threads.has(name)) {
            return { ok: false, error: { code: "thread_exists", detail: "It exists." } };
          }
          const created = thread(req.threadId);
          this.threads.set(name, created);
          return { ok: true, value: created };
        }),
      getThread: () => call("getThread", [], existing),
      deleteThread: () =>
        call("deleteThread", [], () => {
          const found = existing();
          if (!found.ok) return found;
          this.threads.delete(name);
          return { ok: true, value: null };
        }),
      yieldQuota: (grant: number) =>
        call("yieldQuota", [grant], () => ({
          ok: true,
          value: { released: true, reserved: 0, usage: [] },
        })),
      startTurn: (req: StartTurnRequest) =>
        call("startTurn", [req], () => {
          const found = existing();
          if (!found.ok) return found;
          return { ok: true, value: turn("turn_1", found.value.id, this.turnStatus) };
        }),
      getTurn: (turnId: string) =>
        call("getTurn", [turnId], () => {
          const found = existing();
          if (!found.ok) return found;
          return { ok: true, value: turn(turnId, found.value.id, "completed") };
        }),
      keyedTurn: (key: IdempotencyKey) =>
        call("keyedTurn", [key], (): RpcResult<string | null> => {
          const found = existing();
          return found.ok ? { ok: true, value: null } : found;
        }),
      listHistory: (req: ListHistoryRequest) =>
        call("listHistory", [req], (): RpcResult<ListResource<ResponseItem>> => {
          const found = existing();
          if (!found.ok) return found;
          return {
            ok: true,
            value: { object: "list", data: [userMessage("hi")], next_cursor: null },
          };
        }),
      listTurns: (req: ListTurnsRequest) =>
        call("listTurns", [req], (): RpcResult<ListResource<TurnSummary>> => {
          const found = existing();
          return found.ok
            ? { ok: true, value: { object: "list", data: [], next_cursor: null } }
            : found;
        }),
      getPrompt: () =>
        call("getPrompt", [], (): RpcResult<Prompt> => {
          const found = existing();
          if (!found.ok) return found;
          return { ok: true, value: prompt };
        }),
      restore: (req) => call("restore", [req], existing),
      turnRequests: (turnId) =>
        call("turnRequests", [turnId], () => ({
          ok: false,
          error: { code: "turn_not_found", detail: `No turn "${turnId}".` },
        })),
      acceptDelivery: (req) =>
        call("acceptDelivery", [req], () => ({
          ok: false,
          error: { code: "internal", detail: "Not faked." },
        })),
      patchThread: (req) =>
        call("patchThread", [req], () => {
          const found = existing();
          if (!found.ok) return found;
          const metadata: Record<string, string> = { ...found.value.metadata };
          for (const [key, value] of Object.entries(req.metadata)) {
            if (value === null) delete metadata[key];
            else metadata[key] = value;
          }
          const patched = { ...found.value, metadata };
          this.threads.set(name, patched);
          return { ok: true, value: patched };
        }),
      streamTurn: (req: StartTurnRequest) =>
        call("streamTurn", [req], () => {
          const found = existing();
          return found.ok ? { ok: true, value: this.eventStream() } : found;
        }),
      events: (req: EventsRequest) =>
        call("events", [req], () => {
          const found = existing();
          return found.ok ? { ok: true, value: this.eventStream() } : found;
        }),
      submitOutputs: (turnId: string, req: SubmitOutputsRequest) =>
        call("submitOutputs", [turnId, req], () => {
          const found = existing();
          return found.ok ? { ok: true, value: turn(turnId, found.value.id, "completed") } : found;
        }),
      streamOutputs: (turnId: string, req: SubmitOutputsRequest) =>
        call("streamOutputs", [turnId, req], () => {
          const found = existing();
          return found.ok ? { ok: true, value: this.eventStream() } : found;
        }),
      steer: (turnId: string, req: SteerRequest) =>
        call("steer", [turnId, req], () => {
          const found = existing();
          return found.ok
            ? { ok: true, value: turn(turnId, found.value.id, "in_progress") }
            : found;
        }),
      interrupt: (turnId: string) =>
        call("interrupt", [turnId], () => {
          const found = existing();
          return found.ok
            ? { ok: true, value: turn(turnId, found.value.id, "interrupted") }
            : found;
        }),
      rollback: (req: RollbackRequest) => call("rollback", [req], existing),
      compact: (req: CompactRequest) =>
        call("compact", [req], () => {
          const found = existing();
          return found.ok
            ? { ok: true, value: turn("turn_c", found.value.id, "completed") }
            : found;
        }),
      inject: (req: InjectRequest) => call("inject", [req], existing),
      exportRollout: (req: ExportRequest) =>
        call("exportRollout", [req], () => {
          const found = existing();
          if (!found.ok) return found;
          const value = { lines: textStream(this.rolloutText), missingLines: this.missingLines };
          return { ok: true, value };
        }),
      forkSource: (req: ForkSourceRequest) =>
        call("forkSource", [req], () => {
          const found = existing();
          if (!found.ok) return found;
          return {
            ok: true,
            value: {
              lines: textStream(this.rolloutText),
              forkedFrom: found.value.id,
              warnings: [],
              ...(this.sharedSegments && req.borrower ? { shared: this.sharedSegments } : {}),
            },
          };
        }),
      createFromRollout: async (req: CreateFromRolloutRequest) => {
        this.calls.push({ name, method: "createFromRollout", args: [req] });
        const forced = this.failures.get("createFromRollout");
        if (forced instanceof Error) throw forced;
        if (forced !== undefined || this.threads.has(name)) {
          await req.lines.cancel();
          return {
            ok: false,
            error: forced ?? { code: "thread_exists", detail: "It exists." },
          };
        }
        // As the contract asks: read to the end, a broken stream keeps nothing.
        let text: string;
        try {
          text = await new Response(req.lines).text();
        } catch {
          return { ok: false, error: { code: "invalid_request", detail: "The upload broke off." } };
        }
        this.received.set(name, text);
        const bad = text.split("\n").findIndex((line) => line.trim() !== "" && !isJson(line));
        if (bad !== -1) {
          const errors = [{ path: `/line/${bad + 1}`, message: "not JSON" }];
          return { ok: false, error: { code: "invalid_request", detail: "Bad line.", errors } };
        }
        const created = { ...thread(req.threadId), forked_from: req.forkedFrom ?? null };
        this.threads.set(name, created);
        return { ok: true, value: created };
      },
    };
  }
}

export function thread(id: string): ThreadResource {
  return {
    object: "thread",
    id,
    status: "idle",
    config: {
      model: "spindle-local",
      provider: "local",
      permissions: {
        sandbox: "read-only",
        approval_policy: "never",
        writable_roots: [],
        network_access: false,
      },
      environments: [{ id: "local", cwd: "/work" }],
      timezone: "UTC",
      context_sections: {},
      tools: [],
      truncation: { tokens: 10000 },
    },
    turn_count: 0,
    token_usage: null,
    usage: withCacheHitRatio(ZERO_THREAD_USAGE),
    metadata: {},
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
    forked_from: null,
    imported_from: null,
    warnings: [],
  };
}

export function turn(id: string, threadId: string, status: TurnResource["status"]): TurnResource {
  return {
    object: "turn",
    id,
    thread_id: threadId,
    kind: "turn",
    status,
    items: [userMessage("hi")],
    pending_calls: [],
    usage: null,
    error: null,
  };
}

/** The events of a short completed turn, seqs 1-4. */
export function turnEvents(turnId: string, threadId: string): ThreadEvent[] {
  return [
    { seq: 1, type: "turn.started", turn_id: turnId, data: turn(turnId, threadId, "in_progress") },
    {
      seq: 2,
      type: "item.completed",
      turn_id: turnId,
      data: { item: userMessage("hi"), context: false },
    },
    { seq: 3, type: "item.delta", turn_id: turnId, data: { item_id: "msg_1", delta: "hel" } },
    { seq: 4, type: "turn.completed", turn_id: turnId, data: turn(turnId, threadId, "completed") },
  ];
}

/** Values as an NDJSON byte stream, one chunk per line. */
export function ndjson(values: readonly unknown[]): ReadableStream<Uint8Array> {
  return textStream(...values.map((value) => `${JSON.stringify(value)}\n`));
}

/** A byte stream of these chunks of text. */
export function textStream(...chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

/**
 * A byte stream the test writes to line by line, which records whether its reader cancelled it
 * (a client that left must cancel the read and nothing else).
 */
export function controlledStream() {
  const encoder = new TextEncoder();
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const state = { cancelled: false, cancelReason: undefined as unknown };
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    cancel(reason) {
      state.cancelled = true;
      state.cancelReason = reason;
    },
  });
  return {
    stream,
    state,
    push: (value: unknown) => controller.enqueue(encoder.encode(`${JSON.stringify(value)}\n`)),
    pushText: (text: string) => controller.enqueue(encoder.encode(text)),
    pushBytes: (bytes: Uint8Array) => controller.enqueue(bytes),
    close: () => controller.close(),
    error: (reason: unknown) => controller.error(reason),
  };
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

const rolloutLines = [
  '{"timestamp":"2026-01-01T00:00:00.000Z","type":"session_meta","payload":{"id":"t1"}}',
  '{"timestamp":"2026-01-01T00:00:01.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"u1"}}',
];

export function userMessage(text: string): ResponseItem {
  return { type: "message", role: "user", content: [{ type: "input_text", text }] };
}

const prompt: Prompt = {
  instructions: "be brief",
  input: [],
  tools: [],
  parallel_tool_calls: true,
};

/** `printf %s "$KEY" | sha256sum`, computed independently of the code under test. */
export function sha256Hex(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

export const keyA = "sk-tenant-a-secret";
export const keyB = "sk-tenant-b-secret";
export const apiKeys = JSON.stringify({ [sha256Hex(keyA)]: "A", [sha256Hex(keyB)]: "B" });

/** An app with a fixed id generator over a fresh fake namespace, as production is configured. */
export function setup(
  vars: Partial<
    Pick<Env, "SPINDLE_ENV" | "SPINDLE_API_KEYS" | "SPINDLE_CORS_ORIGINS" | "SPINDLE_FORKS">
  > = {},
) {
  const fake = new FakeThreads();
  const app = createApp({ newThreadId: () => "thr_generated" });
  const env = fake.env({ SPINDLE_ENV: "production", SPINDLE_API_KEYS: apiKeys, ...vars });
  const request = (path: string, init: RequestInit & { key?: string } = {}) => {
    const { key = keyA, ...rest } = init;
    const headers = new Headers(rest.headers);
    if (key !== "" && !headers.has("authorization")) headers.set("authorization", `Bearer ${key}`);
    return app.request(path, { ...rest, headers }, env);
  };
  const json = (path: string, body: unknown, init: RequestInit & { key?: string } = {}) =>
    request(path, {
      method: "POST",
      body: JSON.stringify(body),
      ...init,
      headers: { "content-type": "application/json", ...init.headers },
    });
  return { app, fake, env, request, json };
}

/** The problem body, after checking it is served as `application/problem+json`. */
export async function problemOf(res: Response): Promise<unknown> {
  if (res.headers.get("content-type") !== "application/problem+json") {
    throw new Error(`expected a problem, got ${res.status} ${res.headers.get("content-type")}`);
  }
  return res.json();
}
