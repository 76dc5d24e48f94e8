/**
 * `createSpindleClient`: openapi-fetch over the generated types, so every path, parameter, body
 * and answer is checked by the compiler against the OpenAPI document, plus the two streamed
 * routes read as typed `ThreadEvent`s. No runtime validation: the types are the contract, and
 * the drift test keeps them equal to the code's document.
 */
import createClient, { type Client, type FetchResponse } from "openapi-fetch";
import type { components, paths } from "./api-types.ts";
import { readThreadEvents, type ThreadEvent } from "./events.ts";

/**
 * What the typed methods read: JSON answers and problem documents. Left to openapi-fetch's
 * default (every media type), an answer that may be JSON or SSE would be typed as the union of
 * both; SSE answers are read by the stream methods instead.
 */
export type JsonMedia = "application/json" | "application/problem+json";

export interface SpindleClientOptions {
  /** The service's origin (`https://spindle.example.com`); the paths carry `/v1`. */
  baseUrl: string;
  /** A tenant's key (or, for `/v1/admin`, an admin key), sent as `Authorization: Bearer`. */
  apiKey: string;
  /** Replaces `globalThis.fetch` (a test's `SELF.fetch`, a service binding, a proxy). */
  fetch?: (request: Request) => Promise<Response>;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

type Operation<P extends keyof paths, M extends "get" | "post"> = NonNullable<paths[P][M]>;
type ErrorOf<P extends keyof paths, M extends "get" | "post"> = NonNullable<
  FetchResponse<Operation<P, M>, object, JsonMedia>["error"]
>;

export type StartTurnBody = components["schemas"]["StartTurnBody"];
export type Turn = components["schemas"]["Turn"];

/** A streamed answer: its events, or the problem the request was refused with. */
export type StreamResult<E> =
  | {
      /** The events; a stream that breaks off throws `SpindleStreamError`. */
      events: AsyncGenerator<ThreadEvent, void, undefined>;
      /**
       * Set when the server answered JSON instead of a stream (a turn queued behind a running
       * one, `on_busy: "queue"`, is a 202 Turn): `events` is then empty.
       */
      turn?: Turn;
      error?: never;
      response: Response;
    }
  | { events?: never; turn?: never; error: E; response: Response };

export interface StreamOptions {
  signal?: AbortSignal;
  /** `Idempotency-Key`: a retry with the same key replays the same turn's stream. */
  idempotencyKey?: string;
}

export interface EventsOptions {
  /** Replay the events after this seq, then tail (`Last-Event-ID` wins when both are given). */
  after?: number;
  /** The `lastEventId` of a stream that broke off. */
  lastEventId?: number | string;
  signal?: AbortSignal;
}

export interface SpindleClient extends Client<paths, JsonMedia> {
  /** `POST /v1/threads/{id}/turns` with `stream: true`: the turn's events as they happen. */
  streamTurn(
    threadId: string,
    body: Omit<StartTurnBody, "stream">,
    options?: StreamOptions,
  ): Promise<StreamResult<ErrorOf<"/v1/threads/{id}/turns", "post">>>;
  /** `GET /v1/threads/{id}/events`: retained events after a point, then every live one. */
  streamEvents(
    threadId: string,
    options?: EventsOptions,
  ): Promise<StreamResult<ErrorOf<"/v1/threads/{id}/events", "get">>>;
}

export function createSpindleClient(options: SpindleClientOptions): SpindleClient {
  const api = createClient<paths, JsonMedia>({
    baseUrl: options.baseUrl,
    headers: { ...options.headers, Authorization: `Bearer ${options.apiKey}` },
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
  const accept = { Accept: "text/event-stream" };
  return {
    ...api,
    async streamTurn(threadId, body, { signal, idempotencyKey } = {}) {
      const { data, error, response } = await api.POST("/v1/threads/{id}/turns", {
        params: {
          path: { id: threadId },
          header: idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey },
        },
        body: { ...body, stream: true },
        headers: accept,
        parseAs: "stream",
        ...(signal === undefined ? {} : { signal }),
      });
      if (error !== undefined) return { error, response };
      return streamOf(response, data);
    },
    async streamEvents(threadId, { after, lastEventId, signal } = {}) {
      const { data, error, response } = await api.GET("/v1/threads/{id}/events", {
        params: {
          path: { id: threadId },
          query: after === undefined ? {} : { after },
          header: lastEventId === undefined ? {} : { "last-event-id": Number(lastEventId) },
        },
        headers: accept,
        parseAs: "stream",
        ...(signal === undefined ? {} : { signal }),
      });
      if (error !== undefined) return { error, response };
      return streamOf(response, data);
    },
  };
}

async function streamOf(
  response: Response,
  body: ReadableStream<Uint8Array> | null | undefined,
): Promise<StreamResult<never>> {
  const type = response.headers.get("content-type") ?? "";
  if (body != null && type.startsWith("text/event-stream")) {
    return { events: readThreadEvents(body), response };
  }
  // A JSON answer to a stream request: the one a queued turn gets.
  const turn = body == null ? undefined : ((await new Response(body).json()) as Turn);
  return { events: (async function* () {})(), ...(turn === undefined ? {} : { turn }), response };
}
