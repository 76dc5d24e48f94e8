/**
 * A stand-in for the Responses API in the bench process, on 127.0.0.1: every `POST …/responses`
 * is answered at once with one short assistant message as Responses SSE (the event shapes of
 * test/workers/helpers/openai.ts). It records, per request, the body size and its own time: from
 * the first byte of the request reaching its socket to the last byte of the answer handed to the
 * socket. The body is never parsed while a request is timed.
 */
import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";

/** The answer's text: about as long as the local model's `Received N input items. …` answer. */
export const STANDIN_ANSWER =
  "Stand-in answer: a fixed reply about as long as the one the local model gives here.";

export interface Served {
  /** The first path segment of the request (`spindle`, `bare`): which runtime sent it. */
  client: string;
  bodyBytes: number;
  /** First request byte to last response byte, ms. */
  ms: number;
}

/**
 * The answer as SSE. Usage reports the request's bytes ÷ 4 as input tokens (about what a
 * tokenizer gives for JSON-heavy English), so Spindle's token accounting sees the real size.
 */
function sse(n: number, inputTokens: number): string {
  const events = [
    { type: "response.created", response: { id: `resp_bench_${n}`, status: "in_progress" } },
    { type: "response.output_text.delta", delta: STANDIN_ANSWER },
    {
      type: "response.output_item.done",
      item: {
        type: "message",
        id: `msg_bench_${n}`,
        role: "assistant",
        content: [{ type: "output_text", text: STANDIN_ANSWER }],
      },
    },
    {
      type: "response.completed",
      response: {
        id: `resp_bench_${n}`,
        status: "completed",
        usage: {
          input_tokens: inputTokens,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: 20,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: inputTokens + 20,
        },
      },
    },
  ];
  return events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
}

export class StandIn {
  readonly #server: Server;
  /** When the first byte of the socket's current request arrived. */
  readonly #firstByte = new WeakMap<Socket, number>();
  readonly served: Served[] = [];
  /** The newest request body of each client, kept raw for reading after the timed loops. */
  readonly lastBody = new Map<string, Buffer>();
  #answered = 0;

  private constructor(server: Server) {
    this.#server = server;
  }

  static async start(): Promise<{ standIn: StandIn; origin: string }> {
    const server = createServer();
    const standIn = new StandIn(server);
    server.on("connection", (socket) => {
      socket.prependListener("data", () => {
        if (!standIn.#firstByte.has(socket)) standIn.#firstByte.set(socket, performance.now());
      });
    });
    server.on("request", (req, res) => {
      const socket = req.socket;
      const start = standIn.#firstByte.get(socket) ?? performance.now();
      const client = req.url?.split("/")[1] ?? "";
      const chunks: Buffer[] = [];
      let bodyBytes = 0;
      req.on("data", (chunk: Buffer) => {
        chunks.push(chunk);
        bodyBytes += chunk.length;
      });
      req.on("end", () => {
        if (req.method !== "POST" || !req.url?.endsWith("/responses")) {
          res.writeHead(404).end();
          return;
        }
        standIn.#answered += 1;
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        res.end(sse(standIn.#answered, Math.ceil(bodyBytes / 4)));
      });
      res.on("finish", () => {
        const ms = performance.now() - start;
        standIn.#firstByte.delete(socket);
        standIn.served.push({ client, bodyBytes, ms });
        standIn.lastBody.set(client, Buffer.concat(chunks));
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    if (typeof address !== "object" || address === null) throw new Error("stand-in has no port");
    return { standIn, origin: `http://127.0.0.1:${address.port}` };
  }

  /** The requests served since `mark` (an index into `served`) for one client. */
  since(mark: number, client: string): Served[] {
    return this.served.slice(mark).filter((s) => s.client === client);
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}
