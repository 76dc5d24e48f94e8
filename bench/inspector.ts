/**
 * The worker started with its inspector open (`dev.inspector.port`, on a free port), and a minimal
 * Chrome DevTools Protocol client for its isolate.
 */
import { createServer } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

/** What `startInspectedWorker` runs, when not the Spindle worker as configured. */
export interface InspectedWorkerOptions {
  /** The wrangler config (default: the repository's `wrangler.toml`). */
  config?: string;
  /** Another entry module for that config (e.g. a benchmark's subclass of a Durable Object). */
  entrypoint?: string;
  /** Plain-text variables, besides `SPINDLE_ENV=development`. */
  vars?: Record<string, string>;
}

/**
 * Starts the Spindle worker (as development, so the local key works), or the worker `options`
 * name, with wrangler's `unstable_startWorker` on `persist`, with the inspector on a free port.
 */
export async function startInspectedWorker(persist: string, options: InspectedWorkerOptions = {}) {
  const { unstable_startWorker } = await import("wrangler");
  const inspectorPort = await freePort();
  const vars = { SPINDLE_ENV: "development", ...options.vars };
  const worker = await unstable_startWorker({
    config: options.config ?? join(ROOT, "wrangler.toml"),
    ...(options.entrypoint ? { entrypoint: options.entrypoint } : {}),
    bindings: Object.fromEntries(
      Object.entries(vars).map(([name, value]) => [name, { type: "plain_text", value }] as const),
    ),
    dev: {
      persist,
      server: { hostname: "127.0.0.1", port: 0 },
      inspector: { port: inspectorPort },
      watch: false,
      logLevel: "warn",
    },
  });
  return { worker, inspectorPort };
}

export class Inspector {
  readonly #socket: WebSocket;
  readonly #pending = new Map<number, (message: { result?: unknown; error?: unknown }) => void>();
  #nextId = 0;

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown };
      const settle = message.id === undefined ? undefined : this.#pending.get(message.id);
      if (message.id !== undefined && settle) {
        this.#pending.delete(message.id);
        settle(message);
      }
    });
  }

  /** Miniflare's inspector proxy accepts local origins only; Node's WebSocket sends none. */
  static async connect(port: number): Promise<Inspector> {
    const targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()) as {
      webSocketDebuggerUrl: string;
    }[];
    const url = targets[0]?.webSocketDebuggerUrl;
    if (!url) throw new Error("the inspector lists no worker");
    const socket = new WebSocket(url, { headers: { origin: "http://localhost" } } as never);
    await new Promise((resolve, reject) => {
      socket.addEventListener("open", resolve, { once: true });
      socket.addEventListener("error", () => reject(new Error("inspector connection failed")));
    });
    return new Inspector(socket);
  }

  async send<T>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.#nextId;
    const answer = new Promise<{ result?: unknown; error?: unknown }>((resolve) =>
      this.#pending.set(id, resolve),
    );
    this.#socket.send(JSON.stringify({ id, method, params }));
    const message = await answer;
    if (message.error) throw new Error(`${method}: ${JSON.stringify(message.error)}`);
    return message.result as T;
  }

  close(): void {
    this.#socket.close();
  }
}
