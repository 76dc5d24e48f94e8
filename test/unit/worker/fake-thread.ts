import { createHash } from "node:crypto";
import type { Prompt, ResponseItem } from "../../../shared/protocol/index.ts";
import { createApp } from "../../../worker/app.ts";
import type { Env } from "../../../worker/env.ts";
import type { ListResource, ThreadResource, TurnResource } from "../../../worker/schemas.ts";
import type {
  CreateThreadRequest,
  ListHistoryRequest,
  RpcFailure,
  RpcResult,
  StartTurnRequest,
  ThreadRpc,
} from "../../../worker/thread-rpc.ts";

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

  readonly namespace = {
    getByName: (name: string): ThreadRpc => {
      this.names.push(name);
      return this.stub(name);
    },
  };

  env(vars: Partial<Pick<Env, "SPINDLE_ENV" | "SPINDLE_API_KEYS">> = {}): Env {
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
      listHistory: (req: ListHistoryRequest) =>
        call("listHistory", [req], (): RpcResult<ListResource<ResponseItem>> => {
          const found = existing();
          if (!found.ok) return found;
          return {
            ok: true,
            value: { object: "list", data: [userMessage("hi")], next_cursor: null },
          };
        }),
      getPrompt: () =>
        call("getPrompt", [], (): RpcResult<Prompt> => {
          const found = existing();
          if (!found.ok) return found;
          return { ok: true, value: prompt };
        }),
      restore: () => call("restore", [], existing),
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
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
    forked_from: null,
    warnings: [],
  };
}

export function turn(id: string, threadId: string, status: TurnResource["status"]): TurnResource {
  return {
    object: "turn",
    id,
    thread_id: threadId,
    status,
    items: [userMessage("hi")],
    pending_calls: [],
    usage: null,
    error: null,
  };
}

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
export function setup(vars: Partial<Pick<Env, "SPINDLE_ENV" | "SPINDLE_API_KEYS">> = {}) {
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
