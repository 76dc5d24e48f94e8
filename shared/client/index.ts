/**
 * A typed client for Spindle's own API (design §17, docs/client.md): openapi-fetch over types
 * generated from the OpenAPI document (`npm run client:generate`), and an SSE reader for the
 * streamed routes. Pure TypeScript with one package (openapi-fetch): it runs in browsers, Node,
 * Deno and Workers alike.
 */
export type { components, operations, paths } from "./api-types.ts";
export {
  createSpindleClient,
  type EventsOptions,
  type JsonMedia,
  type SpindleClient,
  type SpindleClientOptions,
  type StartTurnBody,
  type StreamOptions,
  type StreamResult,
  type Turn,
} from "./client.ts";
export { type Problem, readThreadEvents, SpindleStreamError, type ThreadEvent } from "./events.ts";
export { readServerSentEvents, type SseMessage, SseParser } from "./sse.ts";
