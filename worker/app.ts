/**
 * The stateless edge: authenticate, validate, scope to the tenant, call the thread's DO, render
 * the result (design §7). No thread state lives here.
 */
import { type Context, Hono } from "hono";
import type { AppEnv } from "./app-env.ts";
import { authenticate } from "./auth.ts";
import { ApiError, isProblemCode, PROBLEM_CONTENT_TYPE, toApiError } from "./errors.ts";
import {
  CreateThreadBodySchema,
  HistoryQuerySchema,
  type InputMessage,
  StartTurnBodySchema,
  ThreadParamsSchema,
  type TurnInput,
  TurnParamsSchema,
} from "./schemas.ts";
import type { RpcResult, ThreadRpc } from "./thread-rpc.ts";
import { getThreadStub, type ThreadStubFactory } from "./thread-stub.ts";
import {
  jsonBodyMaxBytes,
  limitBody,
  turnBodyMaxBytes,
  validBody,
  validParams,
  validQuery,
} from "./validate.ts";

export interface AppOptions {
  /** How to reach a thread's DO; defaults to the `THREAD` namespace under `{tenant}:{thread}`. */
  threadStub?: ThreadStubFactory;
  /** Id for a thread created without one; defaults to `thr_<uuid v4>`. */
  newThreadId?: () => string;
}

const PATHS = {
  threads: "/v1/threads",
  thread: "/v1/threads/:id",
  turns: "/v1/threads/:id/turns",
  turn: "/v1/threads/:id/turns/:turn",
  history: "/v1/threads/:id/history",
  prompt: "/v1/threads/:id/prompt",
  restore: "/v1/threads/:id/restore",
} as const;

export function createApp(options: AppOptions = {}): Hono<AppEnv> {
  const threadStub = options.threadStub ?? getThreadStub;
  const newThreadId = options.newThreadId ?? (() => `thr_${crypto.randomUUID()}`);
  const app = new Hono<AppEnv>();

  app.onError((err, c) => renderError(c, err));
  app.notFound((c) =>
    renderError(c, new ApiError("not_found", `No route matches ${c.req.method} ${c.req.path}.`)),
  );

  app.get("/healthz", (c) => c.json({ ok: true, service: "spindle" }));

  // Authenticate before anything reads the body or touches a DO.
  app.use("/v1/*", authenticate());

  const stubFor = (c: Context<AppEnv>, threadId: string): ThreadRpc =>
    threadStub(c.env, c.var.tenant, threadId);

  app.post(
    PATHS.threads,
    limitBody(jsonBodyMaxBytes),
    validBody(CreateThreadBodySchema),
    async (c) => {
      const { id, ...config } = c.req.valid("json");
      const threadId = id ?? newThreadId();
      const tenant = c.var.tenant;
      const thread = unwrap(
        await threadStub(c.env, tenant, threadId).createThread({ tenant, threadId, config }),
      );
      return c.json(thread, 201, { Location: `${PATHS.threads}/${threadId}` });
    },
  );

  app.get(PATHS.thread, validParams(ThreadParamsSchema), async (c) => {
    const { id } = c.req.valid("param");
    return c.json(unwrap(await stubFor(c, id).getThread()));
  });

  app.delete(PATHS.thread, validParams(ThreadParamsSchema), async (c) => {
    const { id } = c.req.valid("param");
    unwrap(await stubFor(c, id).deleteThread());
    return c.body(null, 204);
  });

  app.post(
    PATHS.turns,
    validParams(ThreadParamsSchema),
    limitBody(turnBodyMaxBytes),
    validBody(StartTurnBodySchema),
    async (c) => {
      const { id } = c.req.valid("param");
      const { input, overrides, on_busy, stream } = c.req.valid("json");
      if (stream) {
        const errors = [{ path: "/stream", message: "Streaming is not implemented yet" }];
        throw new ApiError(
          "invalid_request",
          "Streaming turns (`stream: true`) are not available yet.",
          {
            errors,
          },
        );
      }
      const turn = unwrap(
        await stubFor(c, id).startTurn({
          input: inputMessages(input),
          ...(overrides === undefined ? {} : { overrides }),
          onBusy: on_busy,
        }),
      );
      // A queued turn has not run yet: accepted, not done (RFC 9110 §15.3.3).
      return c.json(turn, turn.status === "in_progress" ? 202 : 200);
    },
  );

  app.get(PATHS.turn, validParams(TurnParamsSchema), async (c) => {
    const { id, turn } = c.req.valid("param");
    return c.json(unwrap(await stubFor(c, id).getTurn(turn)));
  });

  app.get(
    PATHS.history,
    validParams(ThreadParamsSchema),
    validQuery(HistoryQuerySchema),
    async (c) => {
      const { id } = c.req.valid("param");
      const { limit, cursor } = c.req.valid("query");
      const page = await stubFor(c, id).listHistory(
        cursor === undefined ? { limit } : { limit, cursor },
      );
      return c.json(unwrap(page));
    },
  );

  app.get(PATHS.prompt, validParams(ThreadParamsSchema), async (c) => {
    const { id } = c.req.valid("param");
    return c.json(unwrap(await stubFor(c, id).getPrompt()));
  });

  app.post(PATHS.restore, validParams(ThreadParamsSchema), async (c) => {
    const { id } = c.req.valid("param");
    return c.json(unwrap(await stubFor(c, id).restore()));
  });

  // A known path with another method is 405 with `Allow` (RFC 9110 §15.5.6), not 404.
  const allowed: Record<(typeof PATHS)[keyof typeof PATHS], string> = {
    [PATHS.threads]: "POST",
    [PATHS.thread]: "GET, DELETE",
    [PATHS.turns]: "POST",
    [PATHS.turn]: "GET",
    [PATHS.history]: "GET",
    [PATHS.prompt]: "GET",
    [PATHS.restore]: "POST",
  };
  for (const [path, allow] of Object.entries(allowed)) {
    app.all(path, (c) => {
      throw new ApiError(
        "method_not_allowed",
        `${c.req.method} is not allowed here; use ${allow}.`,
        {
          headers: { Allow: allow },
        },
      );
    });
  }

  return app;
}

/** The value of a successful DO call, or its failure thrown as the matching `ApiError`. */
function unwrap<T>(result: RpcResult<T>): T {
  if (result.ok) return result.value;
  const { code, detail, errors } = result.error;
  // Guards against a DO from another deploy that speaks a code this worker does not know.
  if (!isProblemCode(code)) {
    throw new ApiError("internal", "The thread returned an unknown error.", {
      cause: result.error,
    });
  }
  throw new ApiError(code, detail, errors === undefined ? {} : { errors });
}

/** A string input is one user message with one text part. */
function inputMessages(input: TurnInput): InputMessage[] {
  if (typeof input !== "string") return input;
  return [{ type: "message", role: "user", content: [{ type: "input_text", text: input }] }];
}

/** RFC 9457: every error answers `application/problem+json`; unexpected ones are logged. */
function renderError(c: Context<AppEnv>, thrown: unknown): Response {
  const error = toApiError(thrown);
  if (error.code === "internal") {
    console.error("[worker]", c.req.method, c.req.path, error.message, error.cause ?? "");
  }
  return c.body(JSON.stringify(error.toProblem()), error.status, {
    ...error.headers,
    "Content-Type": PROBLEM_CONTENT_TYPE,
  });
}
