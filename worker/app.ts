/**
 * The stateless edge: authenticate, validate, scope to the tenant, call the thread's DO, render
 * the result (design §7). No thread state lives here. The routes are the table in `routes.ts`;
 * this file holds one handler per route.
 */
import type { Context, MiddlewareHandler } from "hono";
import { Hono } from "hono/tiny";
import {
  type CreateFromRolloutRequest,
  type IdempotencyKey,
  type InputMessage,
  importBodyMaxBytes,
  PROBLEM_CONTENT_TYPE,
  type RpcResult,
  type StartTurnRequest,
  type ThreadRpc,
  turnContent,
} from "../shared/api/index.ts";
import { describeError } from "../shared/observability/index.ts";
import type { AppEnv } from "./app-env.ts";
import { authenticate, authorize, isolateKeyCache } from "./auth.ts";
import { corsForBrowsers } from "./cors.ts";
import { ApiError, toApiError, unwrap } from "./errors.ts";
import { type HookCache, isolateHookCache } from "./hook-cache.ts";
import { hookHandlers } from "./hooks.ts";
import { idempotencyOf, threadIdForKey } from "./idempotency.ts";
import type { KeyCache } from "./key-cache.ts";
import { mcpServerHandlers } from "./mcp-servers.ts";
import { requestContext, traceOf } from "./observability.ts";
import { openAIHandlers, renderOpenAIError } from "./openai.ts";
import { isOpenAIPath } from "./openai-routes.ts";
import { buildOpenApiDocument, type OpenApiDocument } from "./openapi.ts";
import { queryOf } from "./query.ts";
import {
  API_ROUTES,
  honoPath,
  IMPORT_MEDIA_TYPES,
  matchesPath,
  type OperationId,
  type RouteInput,
  type RouteSpec,
} from "./routes.ts";
import { SSE_HEADERS, serverSentEvents } from "./sse.ts";
import { homeOf, policyOf, tenancyHandlers } from "./tenancy.ts";
import { borrowerOf, getThreadStub, type ThreadStubFactory } from "./thread-stub.ts";
import {
  limitBody,
  limitStream,
  mediaTypeOf,
  parseRequestPart,
  readJsonBody,
  tooLarge,
} from "./validate.ts";

export interface AppOptions {
  /** How to reach a thread's DO; defaults to the `THREAD` namespace under `{tenant}:{thread}`. */
  threadStub?: ThreadStubFactory;
  /** Id for a thread created, forked or imported without one; defaults to `thr_<uuid v4>`. */
  newThreadId?: () => string;
  /** The largest rollout `POST /v1/threads/import` reads; defaults to 64 MiB. */
  importMaxBytes?: number;
  /** Silence on an SSE stream before a keep-alive comment; defaults to 15 s. */
  keepAliveMs?: number;
  /**
   * The verified tenant keys of this app (each isolate has its own); defaults to the isolate's.
   * Tests give two apps their own, as two isolates would have.
   */
  keyCache?: KeyCache;
  /** The hooks this app has read (each isolate has its own); defaults to the isolate's. */
  hookCache?: HookCache;
}

export type RouteHandler<R> = (
  c: Context<AppEnv>,
  input: RouteInput<R>,
) => Response | Promise<Response>;

/** One handler per route of the table: a route without a handler does not compile. */
export type Handlers = { [K in OperationId]: RouteHandler<(typeof API_ROUTES)[K]> };

const threadUrl = (threadId: string) => `/v1/threads/${threadId}`;

export function createApp(options: AppOptions = {}): Hono<AppEnv> {
  const threadStub = options.threadStub ?? getThreadStub;
  const newThreadId = options.newThreadId ?? (() => `thr_${crypto.randomUUID()}`);
  /** A new thread's id: random, or derived from the request's key so its retry finds it. */
  const newOrKeyedThreadId = async (
    operation: OperationId,
    { idempotency }: { idempotency?: IdempotencyKey },
  ) => (idempotency ? threadIdForKey(operation, idempotency.key) : newThreadId());
  const importMaxBytes = options.importMaxBytes ?? importBodyMaxBytes;
  const keyCache = options.keyCache ?? isolateKeyCache;
  const hookCache = options.hookCache ?? isolateHookCache;
  // Hono's smallest preset (`hono/tiny`, one pattern router): nothing to build on an isolate's
  // first request, where the default compiles its router then, and the least code to load.
  const app = new Hono<AppEnv>();
  let document: OpenApiDocument | undefined;

  const stubFor = (c: Context<AppEnv>, threadId: string): ThreadRpc =>
    threadStub(c.env, homeOf(c), threadId);

  /** The response of a streamed turn (`endAfterTerminal`) or of the thread's tail. */
  const eventStream = (
    c: Context<AppEnv>,
    upstream: ReadableStream<Uint8Array>,
    endAfterTerminal: boolean,
  ): Response =>
    c.body(
      serverSentEvents(upstream, {
        endAfterTerminal,
        ...(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }),
        onError: (error) => logError(c, error, "stream.failed"),
      }),
      200,
      SSE_HEADERS,
    );

  const handlers: Handlers = {
    health: (c) => c.json({ ok: true, service: "spindle" }),

    openApiDocument: (c) => {
      // Built once per isolate, on first request: it only depends on the code.
      document ??= buildOpenApiDocument();
      return c.json(document);
    },

    createThread: async (c, { body, header }) => {
      const { id, metadata, ...config } = body;
      const keyed = await idempotencyOf(header, "createThread", { param: {}, body });
      const threadId = id ?? (await newOrKeyedThreadId("createThread", keyed));
      const tenant = c.var.tenant;
      const thread = unwrap(
        await stubFor(c, threadId).createThread(
          {
            tenant,
            threadId,
            config,
            ...(metadata === undefined ? {} : { metadata }),
            ...policyOf(c),
            ...keyed,
          },
          traceOf(c),
        ),
      );
      return c.json(thread, 201, { Location: threadUrl(threadId) });
    },

    importThread: async (c, { query, header }) => {
      const mediaType = mediaTypeOf(c);
      if (!IMPORT_MEDIA_TYPES.includes(mediaType)) {
        throw new ApiError(
          "unsupported_media_type",
          `Send the rollout as JSONL, with Content-Type ${IMPORT_MEDIA_TYPES.join(" or ")}.`,
          { headers: { "Accept-Post": IMPORT_MEDIA_TYPES.join(", ") } },
        );
      }
      if (Number(c.req.header("content-length")) > importMaxBytes) throw tooLarge(importMaxBytes);
      const body = c.req.raw.body;
      if (body === null) {
        throw new ApiError("invalid_request", "The rollout is empty.", {
          errors: [{ path: "/line/1", message: "No rollout line" }],
        });
      }
      const tenant = c.var.tenant;
      // The body streams past the worker, so the DO adds its digest to this fingerprint.
      const keyed = await idempotencyOf(header, "importThread", { param: query, body: null });
      const threadId = query.id ?? (await newOrKeyedThreadId("importThread", keyed));
      // A paginated fork's parent: its lines, read by the target only if the upload needs them.
      let parent: CreateFromRolloutRequest["parent"];
      if (query.parent !== undefined) {
        const { lines, warnings } = unwrap(await stubFor(c, query.parent).forkSource({}));
        parent = { threadId: query.parent, lines, warnings };
      }
      // Streamed to the DO as it arrives; past the limit, or when the upload breaks off, the DO's
      // read fails and nothing is kept.
      const upload = limitStream(body, importMaxBytes);
      let result: RpcResult<unknown>;
      try {
        result = await stubFor(c, threadId).createFromRollout(
          {
            tenant,
            threadId,
            lines: upload.stream,
            source: "import",
            ...(parent ? { parent } : {}),
            ...policyOf(c),
            ...keyed,
          },
          traceOf(c),
        );
      } catch (thrown) {
        throw upload.failure() ?? thrown;
      }
      const failure = upload.failure();
      if (failure) throw failure;
      return c.json(unwrap(result), 201, { Location: threadUrl(threadId) });
    },

    getThread: async (c, { param }) => c.json(unwrap(await stubFor(c, param.id).getThread())),

    deleteThread: async (c, { param }) => {
      unwrap(await stubFor(c, param.id).deleteThread(traceOf(c)));
      return c.body(null, 204);
    },

    startTurn: async (c, { param, body, header }) => {
      const { input, overrides, on_busy, stream, expected_turn_id, additional_context } = body;
      if (on_busy === "steer" && expected_turn_id === undefined) {
        throw new ApiError("invalid_request", 'on_busy "steer" needs expected_turn_id.', {
          errors: [{ path: "/expected_turn_id", message: 'Required with on_busy "steer"' }],
        });
      }
      const req: StartTurnRequest = {
        content: turnContent(input),
        ...(overrides === undefined ? {} : { overrides }),
        ...(additional_context === undefined ? {} : { additionalContext: additional_context }),
        onBusy: on_busy,
        ...(expected_turn_id === undefined ? {} : { expectedTurnId: expected_turn_id }),
        ...policyOf(c),
        ...(await idempotencyOf(header, "startTurn", { param, body })),
      };
      if (stream ?? acceptsEventStream(c.req.header("accept"))) {
        return eventStream(c, unwrap(await stubFor(c, param.id).streamTurn(req, traceOf(c))), true);
      }
      const turn = unwrap(await stubFor(c, param.id).startTurn(req, traceOf(c)));
      // A queued turn has not run yet: accepted, not done (RFC 9110 §15.3.3).
      return c.json(turn, turn.status === "in_progress" ? 202 : 200);
    },

    listTurns: async (c, { param, query }) => {
      const { limit, cursor } = query;
      const page = await stubFor(c, param.id).listTurns(
        cursor === undefined ? { limit } : { limit, cursor },
      );
      return c.json(unwrap(page));
    },

    getTurn: async (c, { param }) => c.json(unwrap(await stubFor(c, param.id).getTurn(param.turn))),

    submitOutputs: async (c, { param, body, header }) => {
      const stub = stubFor(c, param.id);
      const req = {
        items: body.items,
        ...policyOf(c),
        ...(await idempotencyOf(header, "submitOutputs", { param, body })),
      };
      if (body.stream ?? acceptsEventStream(c.req.header("accept"))) {
        return eventStream(c, unwrap(await stub.streamOutputs(param.turn, req, traceOf(c))), true);
      }
      return c.json(unwrap(await stub.submitOutputs(param.turn, req, traceOf(c))));
    },

    steerTurn: async (c, { param, body, header }) => {
      const req = {
        content: turnContent(body.input),
        ...(await idempotencyOf(header, "steerTurn", { param, body })),
      };
      return c.json(unwrap(await stubFor(c, param.id).steer(param.turn, req)));
    },

    interruptTurn: async (c, { param }) =>
      c.json(unwrap(await stubFor(c, param.id).interrupt(param.turn, traceOf(c)))),

    getEvents: async (c, { param, query, header }) => {
      // A reconnecting EventSource sends Last-Event-ID with the original URL: the header is newer.
      const after = header["last-event-id"] ?? query.after;
      const events = await stubFor(c, param.id).events(after === undefined ? {} : { after });
      return eventStream(c, unwrap(events), false);
    },

    rollbackThread: async (c, { param, body, header }) => {
      const req = {
        turns: body.turns,
        ...(await idempotencyOf(header, "rollbackThread", { param, body })),
      };
      return c.json(unwrap(await stubFor(c, param.id).rollback(req)));
    },

    forkThread: async (c, { param, body, header }) => {
      const tenant = c.var.tenant;
      const keyed = await idempotencyOf(header, "forkThread", { param, body });
      // The target is in the caller's tenant, like the source (design §10 invariant 9).
      const threadId = body.id ?? (await newOrKeyedThreadId("forkThread", keyed));
      const request = {
        ...borrowerOf(c.env, threadId),
        ...(body.before_turn === undefined ? {} : { beforeTurn: body.before_turn }),
      };
      const source = unwrap(await stubFor(c, param.id).forkSource(request));
      let result: RpcResult<unknown>;
      try {
        result = await stubFor(c, threadId).createFromRollout(
          {
            tenant,
            threadId,
            lines: source.lines,
            forkedFrom: source.forkedFrom,
            warnings: source.warnings,
            ...(source.shared ? { shared: source.shared } : {}),
            source: "fork",
            ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
            ...policyOf(c),
            ...keyed,
          },
          traceOf(c),
        );
      } catch (thrown) {
        cancelQuietly(source.lines);
        throw thrown;
      }
      if (!result.ok) cancelQuietly(source.lines);
      return c.json(unwrap(result), 201, { Location: threadUrl(threadId) });
    },

    compactThread: async (c, { param, body, header }) => {
      const req = {
        ...policyOf(c),
        ...(await idempotencyOf(header, "compactThread", { param, body })),
      };
      return c.json(unwrap(await stubFor(c, param.id).compact(req, traceOf(c))));
    },

    injectItems: async (c, { param, body, header }) => {
      const items = body.items ?? textMessage(body.text ?? "");
      const req = {
        items,
        ...policyOf(c),
        ...(await idempotencyOf(header, "injectItems", { param, body })),
      };
      return c.json(unwrap(await stubFor(c, param.id).inject(req)));
    },

    listHistory: async (c, { param, query }) => {
      const { limit, cursor } = query;
      const page = await stubFor(c, param.id).listHistory(
        cursor === undefined ? { limit } : { limit, cursor },
      );
      return c.json(unwrap(page));
    },

    getPrompt: async (c, { param }) => c.json(unwrap(await stubFor(c, param.id).getPrompt())),

    listTurnRequests: async (c, { param }) =>
      c.json(unwrap(await stubFor(c, param.id).turnRequests(param.turn))),

    exportRollout: async (c, { param, query }) => {
      const { lines, missingLines } = unwrap(
        await stubFor(c, param.id).exportRollout({ allowIncomplete: query.allow_incomplete }),
      );
      return c.body(lines, 200, {
        "Content-Type": "application/x-ndjson",
        "Content-Disposition": `attachment; filename="${param.id}.jsonl"`,
        ...(missingLines > 0 ? { "Spindle-Missing-Lines": String(missingLines) } : {}),
      });
    },

    restoreThread: async (c, { param }) =>
      c.json(unwrap(await stubFor(c, param.id).restore(policyOf(c)))),

    patchThread: async (c, { param, body }) =>
      c.json(unwrap(await stubFor(c, param.id).patchThread(body))),

    ...tenancyHandlers(keyCache, hookCache),
    ...hookHandlers(hookCache, threadStub),
    ...mcpServerHandlers(),
    ...openAIHandlers({
      threadStub,
      ...(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }),
    }),
  };

  app.onError((err, c) => renderError(c, err));
  // No route matched: a path some route has is 405 with `Allow` (RFC 9110 §15.5.6), else 404.
  app.notFound((c) => {
    const allow = [
      ...new Set(
        Object.values(API_ROUTES as Record<string, RouteSpec>)
          .filter((route) => matchesPath(route.path, c.req.path))
          .map((route) => route.method.toUpperCase()),
      ),
    ];
    if (allow.length === 0) {
      return renderError(
        c,
        new ApiError("not_found", `No route matches ${c.req.method} ${c.req.path}.`),
      );
    }
    const detail = `${c.req.method} is not allowed here; use ${allow.join(", ")}.`;
    return renderError(
      c,
      new ApiError("method_not_allowed", detail, { headers: { Allow: allow.join(", ") } }),
    );
  });

  // The request's id and log line first; a browser's preflight is answered before any key is
  // asked for; authenticate before anything reads the body or touches a DO.
  app.use("*", requestContext());
  app.use("*", corsForBrowsers());
  app.use("/v1/*", authenticate(keyCache));

  for (const operationId of Object.keys(API_ROUTES) as OperationId[]) {
    const route: RouteSpec = API_ROUTES[operationId];
    const handler = handlers[operationId] as RouteHandler<RouteSpec>;
    const handle: MiddlewareHandler<AppEnv> = async (c) =>
      handler(c, (await readInput(c, route)) as RouteInput<RouteSpec>);
    const method = route.method.toUpperCase();
    const named = routeLog(operationId, route);
    const allowed = authorize(route.access);
    const limited =
      route.body?.kind === "json" || route.body?.kind === "webhook"
        ? [limitBody(route.body.maxBytes)]
        : [];
    app.on(method, honoPath(route.path), inOrder([named, allowed, ...limited, handle]));
  }

  return app;
}

/**
 * A route's steps as one handler. Hono's router keeps an entry per handler, built on an isolate's
 * first request and tried on every request, so a route of four handlers cost four.
 */
function inOrder(steps: MiddlewareHandler<AppEnv>[]): MiddlewareHandler<AppEnv> {
  return (c, next) => {
    const run = async (i: number): Promise<void> => {
      const step = steps[i];
      if (step === undefined) return next();
      const response = await step(c, () => run(i + 1));
      if (response instanceof Response) c.res = response;
    };
    return run(0);
  };
}

/** Parses each part the route declares: path, query, headers, then the JSON body. */
async function readInput(c: Context<AppEnv>, route: RouteSpec) {
  return {
    param: route.params && parseRequestPart(route.params, c.req.param(), "param"),
    query:
      route.query &&
      parseRequestPart(route.query, queryOf(new URL(c.req.url).searchParams), "query"),
    header: route.headers && parseRequestPart(route.headers, c.req.header(), "header"),
    body:
      route.body?.kind === "json"
        ? parseRequestPart(route.body.schema, await readJsonBody(c), "body")
        : undefined,
  };
}

/** Inject's `text` shorthand: one user message with one text part. */
function textMessage(text: string): InputMessage[] {
  return [{ type: "message", role: "user", content: [{ type: "input_text", text }] }];
}

/**
 * Whether an `Accept` header (RFC 9110 §12.5.1) names `text/event-stream` with a non-zero
 * weight. Wildcards do not count: a client that accepts anything gets JSON.
 */
export function acceptsEventStream(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(",").some((range) => {
    const [type, ...params] = range.split(";").map((part) => part.trim().toLowerCase());
    if (type !== "text/event-stream") return false;
    const weight = params.find((param) => param.startsWith("q="));
    return weight === undefined || Number(weight.slice(2)) > 0;
  });
}

/** Releases a stream nobody will read; a stream already handed over is left alone. */
function cancelQuietly(stream: ReadableStream<Uint8Array>): void {
  stream.cancel().catch(() => {});
}

/** The request's log names its route, and the thread and turn of a thread route. */
function routeLog(operation: OperationId, route: RouteSpec): MiddlewareHandler<AppEnv> {
  const threadRoute = route.path.startsWith("/v1/threads/{id}");
  return (c, next) => {
    c.set(
      "log",
      c.var.log.with({
        route: operation,
        ...(threadRoute ? { thread: c.req.param("id"), turn: c.req.param("turn") } : {}),
      }),
    );
    return next();
  };
}

/** An unexpected failure's log line: what failed, never what the request carried. */
function logError(c: Context<AppEnv>, error: ApiError, event = "request.failed"): void {
  c.var.log.error(event, {
    method: c.req.method,
    error_code: error.code,
    error: describeError(error.cause ?? error),
  });
}

/** RFC 9457: every error answers `application/problem+json`; unexpected ones are logged. */
function renderError(c: Context<AppEnv>, thrown: unknown): Response {
  const error = toApiError(thrown);
  if (error.code === "internal") logError(c, error);
  if (isOpenAIPath(c.req.path)) return renderOpenAIError(c, error);
  return c.body(JSON.stringify(error.toProblem()), error.status, {
    ...error.headers,
    "Content-Type": PROBLEM_CONTENT_TYPE,
  });
}
