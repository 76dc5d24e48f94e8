import type { ProblemCode } from "../shared/api/index.ts";
import type * as z from "../shared/zod/index.ts";
import type { Access } from "./auth.ts";

/** The shape of one route of the table (`routes.ts`), and the helpers its entries use. */

export type HttpMethod = "get" | "post" | "patch" | "delete";

/** A JSON body: limited to `maxBytes`, then parsed with `schema` (an empty body reads as `{}`). */
export interface JsonBodySpec<S extends z.ZodMiniType = z.ZodMiniType> {
  kind: "json";
  schema: S;
  maxBytes: number;
}

/**
 * A webhook delivery: the raw bytes the sender signed, read whole up to `maxBytes` and verified
 * before anything parses them.
 */
export interface WebhookBodySpec {
  kind: "webhook";
  maxBytes: number;
  /** Media types senders use; the scheme decides what each must hold. */
  mediaTypes: readonly string[];
}

/** A Codex rollout JSONL body, streamed to the DO unparsed (its size limit is an app option). */
export interface RolloutBodySpec {
  kind: "rollout";
  /** Accepted media types; any other is 415 `unsupported_media_type`. */
  mediaTypes: readonly string[];
}

/**
 * One way a response body is written, for the document: `json` is the schema of the body, `sse`
 * and `ndjson` the schema of each event's `data` or of each line (the OpenAPI 3.1 convention for
 * streams, as OpenAI's document uses for SSE).
 */
export interface ContentSpec {
  format: "json" | "sse" | "ndjson";
  schema: z.ZodMiniType;
}

export interface ResponseSpec {
  description: string;
  content?: readonly ContentSpec[];
  /** Response header name → its description. */
  headers?: Readonly<Record<string, string>>;
}

export interface RouteSpec {
  method: HttpMethod;
  /** OpenAPI path template (`/v1/threads/{id}`); every route under `/v1/` needs an API key. */
  path: string;
  /**
   * Who may call it: anyone (`public`, outside `/v1/`), an admin key (`admin`), or a tenant's key
   * with this scope (403 `forbidden` otherwise).
   */
  access: Access;
  summary: string;
  description?: string;
  params?: z.ZodMiniObject;
  /** A `z.strictObject`: a parameter the route does not know is refused, never ignored. */
  query?: z.ZodMiniObject;
  /** Header parameters; keys lowercase (`c.req.header()` gives them so). */
  headers?: z.ZodMiniObject;
  body?: JsonBodySpec | RolloutBodySpec | WebhookBodySpec;
  responses: Readonly<Record<number, ResponseSpec>>;
  /**
   * The problem codes this route answers with beyond the ones every route of its kind has
   * (`unauthorized` and `forbidden` under `/v1/`, `invalid_request` for a validated request,
   * `payload_too_large` for a body, `internal`), which the document adds itself.
   */
  errors: readonly ProblemCode[];
  /**
   * `openai`: a route of the OpenAI-compatible surface (design §17), whose errors are OpenAI's
   * `{error: {message, type, param, code}}` with `code` the problem code.
   */
  dialect?: "openai";
}

export const jsonBody = <S extends z.ZodMiniType>(
  schema: S,
  maxBytes: number,
): JsonBodySpec<S> => ({ kind: "json", schema, maxBytes });

export const json = (schema: z.ZodMiniType): readonly ContentSpec[] => [{ format: "json", schema }];
