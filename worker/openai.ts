/**
 * The handlers of the OpenAI-compatible surface (design §17): OpenAI's Responses, Conversations
 * and Models endpoints over Spindle's threads. A conversation is a thread and a response a
 * stretch of a turn (`shared/openai`); everything runs through the same thread RPCs as
 * Spindle's own routes, so tenancy, quotas, idempotency keys and webhooks apply unchanged.
 */
import type { Context } from "hono";
import { catalogOf } from "../durable-objects/index.ts";
import type {
  PendingCallAnswerInput,
  StartTurnRequest,
  ThreadResource,
  ThreadRpc,
  TurnResource,
} from "../shared/api/index.ts";
import {
  type CreateResponseBody,
  isClientVisible,
  newConversationId,
  OpenAIInputError,
  type OpenAIInputItem,
  type OpenAIItem,
  type OpenAIList,
  type OpenAIListQuery,
  type OpenAIStreamEvent,
  type OpenAITool,
  openAIItem,
  parseResponseId,
  type ResponseInput,
  type ResponseRef,
  type ResponseSettings,
  ResponseStream,
  responseInput,
  responseResource,
  responseStretch,
  spindleItem,
} from "../shared/openai/index.ts";
import type { ResponseItem, ThreadConfig } from "../shared/protocol/index.ts";
import { jsonPointer, ThreadConfigSchema } from "../shared/protocol/index.ts";
import type { Handlers } from "./app.ts";
import type { AppEnv } from "./app-env.ts";
import { ApiError, unwrap } from "./errors.ts";
import { idempotencyOf, threadIdForKey } from "./idempotency.ts";
import { traceOf } from "./observability.ts";
import type { OPENAI_ROUTES } from "./openai-routes.ts";
import { ndjsonLines, SSE_HEADERS, serverSentEvents } from "./sse.ts";
import { homeOf, policyOf } from "./tenancy.ts";
import { borrowerOf, type ThreadStubFactory } from "./thread-stub.ts";

type OpenAIOperation = keyof typeof OPENAI_ROUTES;

/** The context section that carries a response's `instructions` (for that response only). */
const INSTRUCTIONS_SECTION = "instructions";

export interface OpenAIHandlerOptions {
  threadStub: ThreadStubFactory;
  keepAliveMs?: number;
  now?: () => number;
}

export function openAIHandlers(options: OpenAIHandlerOptions): Pick<Handlers, OpenAIOperation> {
  const now = options.now ?? Date.now;
  const stubFor = (c: Context<AppEnv>, threadId: string): ThreadRpc =>
    options.threadStub(c.env, homeOf(c), threadId);

  /** The turn a response id names, in the caller's tenant; 404 for anything else. */
  const resolve = async (c: Context<AppEnv>, id: string) => {
    const ref = parseResponseId(id);
    if (!ref) throw new ApiError("not_found", `No response "${id}".`);
    const stub = stubFor(c, ref.threadId);
    const turn = await stub.getTurn(ref.turnId);
    if (!turn.ok) throw new ApiError("not_found", `No response "${id}".`);
    return { ref, stub, turn: turn.value };
  };

  /** What a stored response echoes when read back: the thread's current settings. */
  const storedSettings = async (stub: ThreadRpc, ref: ResponseRef): Promise<ResponseSettings> =>
    settingsOf({}, storedDefaults(unwrap(await stub.getThread())), {
      store: true,
      background: false,
      conversation: ref.threadId.startsWith("conv_") ? ref.threadId : null,
      previous: null,
    });

  /**
   * Streams a turn's events as Responses events; a thread made for `store: false` is deleted
   * when the stream is done.
   */
  const respondStreaming = (
    c: Context<AppEnv>,
    upstream: ReadableStream<Uint8Array>,
    stream: ResponseStream,
    discard: (() => Promise<void>) | undefined,
  ): Response => {
    const opening = stream.open();
    let sequence = 0;
    const frames = (events: OpenAIStreamEvent[]) =>
      events
        .map((event) => {
          sequence = event.sequence_number + 1;
          return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
        })
        .join("");
    let pending = frames(opening);
    const body = serverSentEvents(upstream, {
      endAfterTerminal: true,
      ...(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }),
      frame: (line) => {
        const events = stream.push(JSON.parse(line));
        // The specification ends a stream with `[DONE]`, after the terminal event.
        const frame = pending + frames(events) + (stream.ended ? "data: [DONE]\n\n" : "");
        pending = "";
        return { frame, terminal: stream.ended };
      },
      // A stream that breaks off: an `error` event, then the response as failed.
      errorFrame: (error) =>
        `event: error\ndata: ${JSON.stringify({
          type: "error",
          sequence_number: sequence++,
          code: error.code,
          message: error.message,
          param: null,
        })}\n\n${frames(stream.fail(error.code, error.message))}data: [DONE]\n\n`,
      onError: (error) =>
        c.var.log.error("stream.failed", { method: c.req.method, error_code: error.code }),
      ...(discard ? { onFinish: () => c.executionCtx.waitUntil(discard()) } : {}),
    });
    return c.body(body, 200, SSE_HEADERS);
  };

  /**
   * Starts a turn and answers it as a response: JSON, streamed, or in the background. A turn
   * that must follow a named one (`afterTurn`) and does not answers `undefined`: the caller then
   * works out where the response runs instead.
   */
  const answerTurn = async (
    c: Context<AppEnv>,
    run: {
      stub: ThreadRpc;
      req: StartTurnRequest;
      pending: Omit<ResponseRef, "turnId">;
      settings: () => Promise<ResponseSettings>;
      stream: boolean;
      background: boolean;
      discard: (() => Promise<void>) | undefined;
      /** For a refusal: true to answer `undefined`, false to fail with it (or it throws). */
      fallsBack?: (code: string) => Promise<boolean>;
    },
  ): Promise<Response | undefined> => {
    const { stub, req, pending, discard } = run;
    const refused = async (error: { code: string }) =>
      run.fallsBack !== undefined && (await run.fallsBack(error.code));
    if (run.stream || run.background) {
      const upstream = await stub.streamTurn(req, traceOf(c));
      if (!upstream.ok && (await refused(upstream.error))) return undefined;
      const stream = new ResponseStream({
        settings: await run.settings(),
        pending,
        nowMs: now,
      });
      if (run.background) return c.json(await inBackground(unwrap(upstream), stream));
      return respondStreaming(c, unwrap(upstream), stream, discard);
    }
    let turn: TurnResource;
    try {
      const started = await stub.startTurn(req, traceOf(c));
      if (!started.ok && (await refused(started.error))) return undefined;
      turn = unwrap(started);
    } finally {
      await discard?.();
    }
    return c.json(
      responseResource(turn, { ...pending, turnId: turn.id }, await run.settings(), now()),
    );
  };

  return {
    createResponse: async (c, { body, header }) => {
      checkSupported(body);
      const input = inputOf(body.input);
      const store = body.store ?? true;
      const background = body.background ?? false;
      if (background && !store) {
        throw invalid("A background response is stored: send store true.", "background");
      }
      const conversation =
        typeof body.conversation === "string" ? body.conversation : body.conversation?.id;
      if (conversation !== undefined && body.previous_response_id) {
        throw invalid(
          "Send conversation or previous_response_id, not both.",
          "previous_response_id",
        );
      }
      const overrides = overridesOf(body);
      const keyed = await idempotencyOf(header, "createResponse", { param: {}, body });
      const extras = {
        store,
        background,
        conversation: conversation ?? null,
        previous: body.previous_response_id ?? null,
      };
      const turnRequest = (withOverrides: boolean): StartTurnRequest => ({
        content: input.content,
        ...(input.replayed.length > 0 ? { replayed: input.replayed } : {}),
        ...(withOverrides ? { overrides } : {}),
        onBusy: "reject",
        ...policyOf(c),
        ...keyed,
      });
      const pendingOn = (threadId: string) => ({
        threadId,
        start: 0,
        inputs: input.recordedCount,
      });
      const streamed = { stream: body.stream ?? false, background };

      // A continuation of the newest response is one call: the turn itself checks that the
      // response it follows is still the thread's newest (`afterTurn`), and the echo needs the
      // thread only for a request that names no model. Anything else (a branch, an answer to a
      // paused turn, a response that is still running) works out where it runs first.
      if (body.previous_response_id && store && input.answers.length === 0) {
        const previous = body.previous_response_id;
        const ref = parseResponseId(previous);
        if (!ref) throw missingResponse(previous);
        const stub = stubFor(c, ref.threadId);
        let read: ReturnType<ThreadRpc["getThread"]> | undefined;
        const thread = async () => {
          read ??= stub.getThread();
          const found = await read;
          if (!found.ok) throw missingResponse(previous);
          return found.value;
        };
        if (body.model === undefined) void thread().catch(() => undefined);
        const answered = await answerTurn(c, {
          stub,
          req: { ...turnRequest(true), afterTurn: ref.turnId },
          pending: pendingOn(ref.threadId),
          settings: async () =>
            settingsOf(body, requestDefaults(body.model ?? (await thread()).config.model), extras),
          ...streamed,
          discard: undefined,
          fallsBack: async (code) => {
            if (code === "turn_mismatch") return true;
            if (code === "not_found") await thread();
            if (code === "thread_busy" && (await thread()).last_turn_id === ref.turnId) {
              throw invalid("The previous response is still in progress.", "previous_response_id");
            }
            return false;
          },
        });
        if (answered) return answered;
      }

      const target = await targetOf(c, body, conversation, store, input, overrides, keyed);
      const stub = stubFor(c, target.threadId);
      const discard = store
        ? undefined
        : async () => {
            await stub.deleteThread(traceOf(c)).catch(() => undefined);
          };
      const thread = target.thread;

      if (target.resume) {
        const { turn, answers } = target.resume;
        const ref: ResponseRef = {
          threadId: target.threadId,
          turnId: turn.id,
          start: turn.items.length,
          inputs: answers.filter((a) => a.type === "function_call_output").length,
        };
        // A resumed turn runs on the thread's settings: the request changes none of them.
        const settings = settingsOf(body, storedDefaults(thread), extras);
        const req = { items: answers, ...policyOf(c), ...keyed };
        if (body.stream || background) {
          const upstream = unwrap(await stub.streamOutputs(turn.id, req, traceOf(c)));
          const stream = new ResponseStream({ settings, ref, earlier: turn.items, nowMs: now });
          if (background) return c.json(await inBackground(upstream, stream));
          return respondStreaming(c, upstream, stream, discard);
        }
        const resumed = unwrap(await stub.submitOutputs(turn.id, req, traceOf(c)));
        await discard?.();
        return c.json(responseResource(resumed, ref, settings, now()));
      }

      const answered = await answerTurn(c, {
        stub,
        req: turnRequest(!target.created),
        pending: pendingOn(target.threadId),
        settings: async () => settingsOf(body, requestDefaults(thread.config.model), extras),
        ...streamed,
        discard,
      });
      if (!answered) throw new ApiError("internal", "The response did not start.");
      return answered;
    },

    getResponse: async (c, { param, query }) => {
      if (query.stream === "true") {
        throw new ApiError(
          "unsupported_parameter",
          "Streaming a stored response again is not supported: follow the thread's events.",
          { errors: [{ path: "stream", message: "not supported" }] },
        );
      }
      const { ref, stub, turn } = await resolve(c, param.response_id);
      return c.json(responseResource(turn, ref, await storedSettings(stub, ref), now()));
    },

    deleteResponse: async (c, { param }) => {
      const { ref, stub } = await resolve(c, param.response_id);
      const thread = unwrap(await stub.getThread());
      if (thread.last_turn_id !== ref.turnId) {
        throw new ApiError(
          "turn_mismatch",
          "Only a thread's newest response can be deleted; roll the thread back instead.",
        );
      }
      if (thread.turn_count <= 1) unwrap(await stub.deleteThread(traceOf(c)));
      else unwrap(await stub.rollback({ turns: 1 }));
      return c.json({ id: param.response_id, object: "response", deleted: true as const });
    },

    cancelResponse: async (c, { param }) => {
      const { ref, stub } = await resolve(c, param.response_id);
      const turn = unwrap(await stub.interrupt(ref.turnId, traceOf(c)));
      return c.json(responseResource(turn, ref, await storedSettings(stub, ref), now()));
    },

    listInputItems: async (c, { param, query }) => {
      const { ref, turn } = await resolve(c, param.response_id);
      const { input } = responseStretch(turn.items, ref.start, ref.inputs);
      const items = input.flatMap((item, i) => {
        const mapped = openAIItem(item, `item_${ref.turnId}_in_${i}`);
        return mapped ? [mapped] : [];
      });
      return c.json(page(items, query));
    },

    createConversation: async (c, { body, header }) => {
      const keyed = await idempotencyOf(header, "createConversation", { param: {}, body });
      const threadId = keyed.idempotency
        ? `conv_${(await threadIdForKey("createConversation", keyed.idempotency.key)).slice(4)}`
        : newConversationId();
      const items = (body.items ?? []).map((item, i) => spindleItemAt(item, `items[${i}]`));
      const stub = stubFor(c, threadId);
      let thread = unwrap(
        await stub.createThread(
          {
            tenant: c.var.tenant,
            threadId,
            config: {},
            ...(body.metadata ? { metadata: body.metadata } : {}),
            ...policyOf(c),
            ...keyed,
          },
          traceOf(c),
        ),
      );
      if (items.length > 0) thread = unwrap(await stub.inject({ items, ...policyOf(c) }));
      return c.json(conversationOf(thread));
    },

    getConversation: async (c, { param }) =>
      c.json(conversationOf(unwrap(await stubFor(c, param.conversation_id).getThread()))),

    updateConversation: async (c, { param, body }) => {
      const stub = stubFor(c, param.conversation_id);
      const current = unwrap(await stub.getThread()).metadata;
      const next = body.metadata ?? {};
      const patch: Record<string, string | null> = { ...next };
      for (const key of Object.keys(current)) if (!(key in next)) patch[key] = null;
      return c.json(conversationOf(unwrap(await stub.patchThread({ metadata: patch }))));
    },

    deleteConversation: async (c, { param }) => {
      unwrap(await stubFor(c, param.conversation_id).deleteThread(traceOf(c)));
      return c.json({
        id: param.conversation_id,
        object: "conversation.deleted",
        deleted: true as const,
      });
    },

    listConversationItems: async (c, { param, query }) =>
      c.json(page(await conversationItems(stubFor(c, param.conversation_id)), query)),

    addConversationItems: async (c, { param, body, header }) => {
      const stub = stubFor(c, param.conversation_id);
      const items = body.items.map((item, i) => spindleItemAt(item, `items[${i}]`));
      const keyed = await idempotencyOf(header, "addConversationItems", { param, body });
      unwrap(await stub.inject({ items, ...policyOf(c), ...keyed }));
      const all = await conversationItems(stub);
      const added = all.slice(-items.length);
      return c.json(page(added, { order: "asc", limit: 100 }));
    },

    getConversationItem: async (c, { param }) => {
      const items = await conversationItems(stubFor(c, param.conversation_id));
      const item = items.find((i) => i.id === param.item_id);
      if (!item)
        throw new ApiError("not_found", `No item "${param.item_id}" in this conversation.`);
      return c.json(item);
    },

    deleteConversationItem: async (c, { param }) => {
      await conversationItems(stubFor(c, param.conversation_id));
      throw new ApiError(
        "unsupported_parameter",
        "A conversation's items cannot be deleted one by one: its history is append-only. " +
          "Roll back turns with POST /v1/threads/{id}/rollback.",
      );
    },

    listModels: (c) => {
      const catalog = catalogOf(c.env);
      return c.json({
        object: "list" as const,
        data: catalog.slugs().map((slug) => modelOf(slug, catalog.get(slug)?.provider ?? "local")),
      });
    },

    getModel: (c, { param }) => {
      const model = catalogOf(c.env).get(param.model);
      if (!model) throw new ApiError("not_found", `No model "${param.model}" in the catalog.`);
      return c.json(modelOf(model.slug, model.provider));
    },
  };

  /**
   * Where a response runs: the thread it continues (`conversation`, `previous_response_id`), a
   * fork when it branches or must not change what it continues (`store: false`), or a new
   * thread; and whether it resumes a paused turn instead of starting one. Reads no more than it
   * must: a continuation is one `getThread`, the paused turn only when the input answers one.
   */
  async function targetOf(
    c: Context<AppEnv>,
    body: CreateResponseBody,
    conversation: string | undefined,
    store: boolean,
    input: ResponseInput,
    overrides: ThreadConfig,
    keyed: Awaited<ReturnType<typeof idempotencyOf>>,
  ): Promise<{
    threadId: string;
    thread: ThreadResource;
    created: boolean;
    resume?: { turn: TurnResource; answers: PendingCallAnswerInput[] };
  }> {
    let base: { thread: ThreadResource; turnId: string | undefined; newest: boolean } | undefined;
    if (body.previous_response_id) {
      const missing = () => missingResponse(body.previous_response_id as string);
      const ref = parseResponseId(body.previous_response_id);
      if (!ref) throw missing();
      const thread = await stubFor(c, ref.threadId).getThread();
      if (!thread.ok) throw missing();
      // A retry of a continuation finds the turn its first attempt added: still a continuation.
      const retried =
        keyed.idempotency !== undefined &&
        thread.value.last_turn_id !== ref.turnId &&
        unwrap(await stubFor(c, ref.threadId).keyedTurn(keyed.idempotency)) !== null;
      const newest = retried || thread.value.last_turn_id === ref.turnId;
      if (newest && thread.value.status === "running") {
        throw invalid("The previous response is still in progress.", "previous_response_id");
      }
      base = { thread: thread.value, turnId: ref.turnId, newest };
    } else if (conversation !== undefined) {
      const thread = unwrap(await stubFor(c, conversation).getThread());
      base = { thread, turnId: thread.last_turn_id, newest: true };
    }
    // The paused turn the input answers, if it answers one.
    let paused: TurnResource | undefined;
    if (
      base?.turnId !== undefined &&
      base.newest &&
      base.thread.status === "requires_action" &&
      input.answers.length > 0
    ) {
      const turn = unwrap(await stubFor(c, base.thread.id).getTurn(base.turnId));
      if (answersPending(turn, input)) paused = turn;
    }
    if (base !== undefined && (!store || !base.newest)) {
      // A branch, or a continuation that must leave its thread as it is: a fork at the response
      // (under a key, the fork a retry finds again).
      const threadId = keyed.idempotency
        ? await threadIdForKey("createResponse", keyed.idempotency.key)
        : store
          ? `thr_${crypto.randomUUID()}`
          : temporaryId();
      const source = unwrap(
        await stubFor(c, base.thread.id).forkSource({
          ...borrowerOf(c.env, threadId),
          ...(base.turnId === undefined ? {} : { afterTurn: base.turnId }),
        }),
      );
      const thread = unwrap(
        await stubFor(c, threadId).createFromRollout(
          {
            tenant: c.var.tenant,
            threadId,
            lines: source.lines,
            forkedFrom: source.forkedFrom,
            warnings: source.warnings,
            ...(source.shared ? { shared: source.shared } : {}),
            source: "fork",
            ...policyOf(c),
            ...keyed,
          },
          traceOf(c),
        ),
      );
      // The fork rebuilds the paused turn from its lines; the answers resume it there.
      const turn = paused ? unwrap(await stubFor(c, threadId).getTurn(paused.id)) : undefined;
      return {
        threadId,
        thread,
        created: false,
        ...(turn ? { resume: { turn, answers: input.answers } } : {}),
      };
    }
    if (base !== undefined) {
      return {
        threadId: base.thread.id,
        thread: base.thread,
        created: false,
        ...(paused ? { resume: { turn: paused, answers: input.answers } } : {}),
      };
    }
    if (input.recordedCount === 0) throw invalid("A response needs input.", "input");
    const threadId = keyed.idempotency
      ? await threadIdForKey("createResponse", keyed.idempotency.key)
      : store
        ? `thr_${crypto.randomUUID()}`
        : temporaryId();
    const stub = stubFor(c, threadId);
    const created = await stub.createThread(
      {
        tenant: c.var.tenant,
        threadId,
        config: creationConfig(overrides),
        ...(body.metadata ? { metadata: body.metadata } : {}),
        ...policyOf(c),
        ...keyed,
      },
      traceOf(c),
    );
    if (created.ok) return { threadId, thread: created.value, created: true };
    // A retry with the same key finds the thread its first attempt made.
    if (created.error.code !== "thread_exists") unwrap(created);
    return { threadId, thread: unwrap(await stub.getThread()), created: false };
  }
}

/** Starts the work and answers once its turn has started; the rest runs in the thread. */
async function inBackground(
  upstream: ReadableStream<Uint8Array>,
  stream: ResponseStream,
): Promise<unknown> {
  const reader = upstream.getReader();
  let opened = stream.open();
  try {
    for await (const line of ndjsonLines(reader)) {
      if (opened.length > 0) break;
      opened = stream.push(JSON.parse(line));
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  const created = opened.find((e) => e.type === "response.created");
  if (!created) throw new ApiError("internal", "The response did not start.");
  return { ...(created.response as object), background: true };
}

/** Whether an input answers exactly the calls and approvals a paused turn waits on. */
function answersPending(turn: TurnResource, input: ResponseInput): boolean {
  if (input.answers.length === 0) return false;
  const outputs = input.answers.filter((a) => a.type === "function_call_output");
  if (input.recordedCount !== outputs.length) return false;
  const calls = new Set(turn.pending_calls.map((call) => call.call_id));
  const approvals = new Set((turn.pending_approvals ?? []).map((a) => a.id));
  return input.answers.every((answer) =>
    answer.type === "function_call_output"
      ? calls.has(answer.call_id)
      : approvals.has(answer.approval_request_id),
  );
}

/** A thread made for a `store: false` response, deleted once it has answered. */
function temporaryId(): string {
  return `tmp_${crypto.randomUUID()}`;
}

/** A `previous_response_id` that names no response the caller can see. */
function missingResponse(id: string): ApiError {
  return new ApiError("not_found", `No response "${id}".`, {
    errors: [{ path: "previous_response_id", message: "not found" }],
  });
}

function invalid(message: string, param: string): ApiError {
  return new ApiError("invalid_request", message, { errors: [{ path: param, message }] });
}

function inputOf(input: CreateResponseBody["input"]): ResponseInput {
  try {
    return responseInput(input);
  } catch (thrown) {
    throw asApiError(thrown);
  }
}

function spindleItemAt(item: OpenAIInputItem, param: string): ResponseItem {
  try {
    return spindleItem(item, param);
  } catch (thrown) {
    throw asApiError(thrown);
  }
}

function asApiError(thrown: unknown): unknown {
  if (!(thrown instanceof OpenAIInputError)) return thrown;
  return new ApiError(thrown.code, thrown.message, {
    errors: [{ path: thrown.param, message: thrown.message }],
  });
}

/** Settings Spindle cannot honour are refused, never silently dropped. */
function checkSupported(body: CreateResponseBody): void {
  const unsupported = (param: string, message: string) =>
    new ApiError("unsupported_parameter", message, { errors: [{ path: param, message }] });
  if (body.prompt !== undefined && body.prompt !== null) {
    throw unsupported("prompt", "Prompt templates are not supported: send instructions and input.");
  }
  const format = body.text?.format as { type?: unknown } | undefined | null;
  if (format && format.type !== "text") {
    throw unsupported("text.format", "Only text output is supported (text.format type text).");
  }
  const choice = body.tool_choice;
  if (choice !== undefined && choice !== null && choice !== "auto") {
    throw unsupported("tool_choice", 'Only tool_choice "auto" is supported.');
  }
}

/** The thread settings a response's request sets: model, tools, reasoning, its instructions. */
function overridesOf(body: CreateResponseBody): ThreadConfig {
  const overrides: Record<string, unknown> = {
    ...(body.model ? { model: body.model } : {}),
    tools: (body.tools ?? []).map(toolOf),
    context_sections: {
      [INSTRUCTIONS_SECTION]: body.instructions
        ? { role: "developer", text: body.instructions }
        : null,
    },
    // A response's reasoning settings are its own: without them, the model's defaults.
    reasoning: body.reasoning
      ? {
          ...(body.reasoning.effort ? { effort: body.reasoning.effort } : {}),
          ...(body.reasoning.summary ? { summary: body.reasoning.summary } : {}),
        }
      : null,
  };
  const parsed = ThreadConfigSchema.safeParse(overrides);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = issue ? jsonPointer(issue.path) : "";
    throw new ApiError("invalid_request", issue?.message ?? "Invalid settings.", {
      errors: [{ path: openAIParam(path), message: issue?.message ?? "invalid" }],
    });
  }
  return parsed.data;
}

/** A new thread's configuration: the overrides, without what they clear. */
function creationConfig(overrides: ThreadConfig): ThreadConfig {
  const sections = Object.fromEntries(
    Object.entries(overrides.context_sections ?? {}).filter(([, section]) => section !== null),
  );
  const { context_sections: _cleared, reasoning, ...kept } = overrides;
  const rest = reasoning ? { ...kept, reasoning } : kept;
  return Object.keys(sections).length > 0 ? { ...rest, context_sections: sections } : rest;
}

function toolOf(tool: OpenAITool, index: number): Record<string, unknown> {
  const param = `tools[${index}]`;
  if (tool.type === "function") {
    const fn = tool as OpenAITool & { name: string; description?: string | null };
    const { parameters, strict } = tool as { parameters?: unknown; strict?: boolean | null };
    return {
      type: "function",
      name: fn.name,
      description: fn.description ?? "",
      ...(parameters ? { parameters } : {}),
      ...(strict === undefined || strict === null ? {} : { strict }),
    };
  }
  if (tool.type === "mcp") {
    const mcp = tool as {
      server_label: string;
      server_url?: string;
      allowed_tools?: string[] | { tool_names?: string[] } | null;
      require_approval?: unknown;
      headers?: Record<string, string> | null;
    };
    if (mcp.headers) {
      throw new ApiError(
        "unsupported_parameter",
        "Give an MCP server's credentials by registering it (POST /v1/mcp-servers), not inline.",
        { errors: [{ path: `${param}.headers`, message: "not supported inline" }] },
      );
    }
    const allowed = Array.isArray(mcp.allowed_tools)
      ? mcp.allowed_tools
      : mcp.allowed_tools?.tool_names;
    return {
      type: "mcp",
      server_label: mcp.server_label,
      ...(mcp.server_url ? { server_url: mcp.server_url } : {}),
      ...(allowed ? { allowed_tools: allowed } : {}),
      ...(mcp.require_approval === undefined || mcp.require_approval === null
        ? {}
        : { require_approval: mcp.require_approval }),
    };
  }
  throw new ApiError(
    "unsupported_parameter",
    `Tools of type ${tool.type} are not supported: function and mcp tools are.`,
    { errors: [{ path: `${param}.type`, message: "not supported" }] },
  );
}

/** `/tools/0/name` → `tools[0].name`: OpenAI's spelling of a parameter path. */
export function openAIParam(pointer: string): string {
  return pointer
    .split("/")
    .filter((part) => part !== "")
    .map((part, i) => (/^\d+$/.test(part) ? `[${part}]` : i === 0 ? part : `.${part}`))
    .join("");
}

/** What a response echoes where its request names nothing: what the turn then runs with. */
interface EchoDefaults {
  model: string;
  tools: readonly unknown[];
  instructions: string | null;
  reasoning: ThreadResource["config"]["reasoning"];
  metadata: Record<string, string>;
}

/**
 * A new turn's: the thread's model; no tools, instructions or reasoning settings (a request's
 * replace the thread's for its turn, `overridesOf`), no metadata (a response's metadata is its
 * request's, as OpenAI echoes it).
 */
function requestDefaults(model: string): EchoDefaults {
  return { model, tools: [], instructions: null, reasoning: undefined, metadata: {} };
}

/** A stored or resumed turn's: the thread's current settings (those its newest turn ran with). */
function storedDefaults(thread: ThreadResource): EchoDefaults {
  return {
    model: thread.config.model,
    tools: thread.config.tools ?? [],
    instructions: thread.config.context_sections?.[INSTRUCTIONS_SECTION]?.text ?? null,
    reasoning: thread.config.reasoning,
    metadata: thread.metadata,
  };
}

/** What a response echoes: the request's settings, else the defaults. */
function settingsOf(
  body: Partial<CreateResponseBody>,
  defaults: EchoDefaults,
  extras: {
    store: boolean;
    background: boolean;
    conversation: string | null;
    previous: string | null;
  },
): ResponseSettings {
  // Function tools echo every field the specification requires, null when not given.
  const tools = (body.tools ?? defaults.tools).map((entry) => {
    const tool = entry as { type: string } & Record<string, unknown>;
    return tool.type === "function"
      ? {
          type: "function",
          name: tool.name,
          description: tool.description ?? null,
          parameters: tool.parameters ?? null,
          strict: tool.strict ?? null,
        }
      : { ...tool };
  });
  // A request's reasoning replaces the thread's whole (`resolveSessionConfiguration`).
  const reasoning = body.reasoning ?? defaults.reasoning;
  return {
    // The model the request names runs the response (an unknown one is refused before).
    model: body.model ?? defaults.model,
    instructions: body.instructions ?? defaults.instructions,
    tools: tools as ResponseSettings["tools"],
    tool_choice: body.tool_choice ?? "auto",
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    reasoning: {
      effort: oneOf(REASONING_EFFORTS, reasoning?.effort),
      summary: oneOf(REASONING_SUMMARIES, reasoning?.summary),
    },
    text: { format: { type: "text" } },
    max_output_tokens: body.max_output_tokens ?? null,
    max_tool_calls: body.max_tool_calls ?? null,
    temperature: body.temperature ?? 1,
    top_p: body.top_p ?? 1,
    top_logprobs: body.top_logprobs ?? 0,
    presence_penalty: body.presence_penalty ?? 0,
    frequency_penalty: body.frequency_penalty ?? 0,
    truncation: body.truncation ?? "disabled",
    metadata: body.metadata ?? defaults.metadata,
    store: extras.store,
    background: extras.background,
    user: body.user ?? null,
    safety_identifier: body.safety_identifier ?? null,
    prompt_cache_key: body.prompt_cache_key ?? null,
    service_tier: "default",
    previous_response_id: extras.previous,
    conversation: extras.conversation ? { id: extras.conversation } : null,
  };
}

/** The reasoning settings Responses names; Spindle's others (`minimal`, `max`, …) echo null. */
const REASONING_EFFORTS = ["none", "low", "medium", "high", "xhigh"] as const;
const REASONING_SUMMARIES = ["auto", "concise", "detailed"] as const;

function oneOf(allowed: readonly string[], value: string | null | undefined): string | null {
  return value !== null && value !== undefined && allowed.includes(value) ? value : null;
}

function conversationOf(thread: ThreadResource) {
  return {
    id: thread.id,
    object: "conversation" as const,
    created_at: Math.floor(Date.parse(thread.created_at) / 1000),
    metadata: thread.metadata,
  };
}

function modelOf(slug: string, provider: string) {
  return { id: slug, object: "model" as const, created: 0, owned_by: provider };
}

/** A thread's history as conversation items: what clients sent and the model answered. */
async function conversationItems(stub: ThreadRpc): Promise<OpenAIItem[]> {
  const items: OpenAIItem[] = [];
  let cursor: string | undefined;
  let index = 0;
  do {
    const page = unwrap(
      await stub.listHistory(cursor === undefined ? { limit: 1000 } : { limit: 1000, cursor }),
    );
    for (const item of page.data) {
      const position = index++;
      if (!isClientVisible(item)) continue;
      const mapped = openAIItem(item, `item_${position}`);
      if (mapped) items.push(mapped);
    }
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
  return items;
}

/** One page of OpenAI's list: `order`, `after` (an item id), `limit`. */
function page(
  items: readonly OpenAIItem[],
  query: Pick<OpenAIListQuery, "order" | "limit"> & { after?: string | undefined },
): OpenAIList<OpenAIItem> {
  const ordered = query.order === "asc" ? [...items] : [...items].reverse();
  let start = 0;
  if (query.after !== undefined) {
    const at = ordered.findIndex((item) => item.id === query.after);
    if (at === -1) throw invalid(`No item "${query.after}" in this list.`, "after");
    start = at + 1;
  }
  const data = ordered.slice(start, start + query.limit);
  return {
    object: "list",
    data,
    first_id: data[0]?.id ?? null,
    last_id: data.at(-1)?.id ?? null,
    has_more: start + query.limit < ordered.length,
  };
}

/**
 * An error on the OpenAI surface: OpenAI's `{error: {message, type, param, code}}` with its
 * status, `code` the problem code. A conflict the SDK would retry on its own (it retries 409)
 * that no retry can fix says `x-should-retry: false`.
 */
export function renderOpenAIError(c: Context<AppEnv>, error: ApiError): Response {
  const path = error.errors?.[0]?.path;
  const body = {
    error: {
      message: error.message,
      type: openAIErrorType(error.status),
      param:
        path === undefined || path === ""
          ? null
          : openAIParam(path.startsWith("/") ? path : `/${path}`),
      code: error.code,
    },
  };
  // The SDK retries 409 and 429 by itself: a busy thread, or a used-up quota with no time to
  // wait for, would answer the same.
  const retry =
    (error.status === 409 && error.code !== "idempotency_key_in_use") ||
    (error.status === 429 && error.headers["Retry-After"] === undefined)
      ? "false"
      : undefined;
  return c.json(body, error.status, {
    ...error.headers,
    ...(retry ? { "x-should-retry": retry } : {}),
  });
}

function openAIErrorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}
