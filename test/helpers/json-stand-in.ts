/**
 * The HTTP floor of the model-wire stand-ins (Responses, Chat Completions, Messages API): a
 * server on 127.0.0.1 that reads each request's body whole, parses it as a JSON object where it
 * is one, and hands it to the stand-in with the response to write.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type Json = Record<string, unknown>;

/** One request as a stand-in sees it. */
export interface JsonRequest {
  method: string;
  /** The path, e.g. `/v1/responses`. */
  path: string;
  headers: IncomingMessage["headers"];
  /** The body as sent. */
  raw: string;
  /** The body parsed, when it is a JSON object. */
  body: Json | undefined;
}

export interface JsonServer {
  /** `http://127.0.0.1:{port}`. */
  origin: string;
  close(): Promise<void>;
}

/** `value` when it is a plain JSON object. */
export function asRecord(value: unknown): Json | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Json)
    : undefined;
}

/** Serves `answer` on 127.0.0.1 (`port` 0, the default, takes any free one). */
export async function serveJson(
  answer: (request: JsonRequest, res: ServerResponse) => void,
  port = 0,
): Promise<JsonServer> {
  const server = createServer((req, res) => {
    let raw = "";
    req.setEncoding("utf8");
    req.on("data", (piece: string) => {
      raw += piece;
    });
    req.on("end", () => {
      let body: Json | undefined;
      try {
        body = asRecord(JSON.parse(raw));
      } catch {
        body = undefined;
      }
      const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
      answer({ method: req.method ?? "", path, headers: req.headers, raw, body }, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const { port: bound } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${bound}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Whether a prompt-cache entry last used at `atMs` is still alive under a `ttlMs` lifetime
 * (undefined: it never expires), as a provider's cache drops a prefix unused that long.
 */
export function cacheAlive(atMs: number, ttlMs: number | undefined, nowMs = Date.now()): boolean {
  return ttlMs === undefined || nowMs - atMs <= ttlMs;
}
