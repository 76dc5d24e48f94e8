import type { McpListedTool } from "./step-tools.ts";
import type { McpCallToolResult } from "./tool-result.ts";

/** The largest answer a server may send to one request (a listing, a call's result). */
export const MAX_MCP_RESPONSE_BYTES = 4 * 1024 * 1024;
/** Pages of `tools/list` read before a listing is taken as runaway. */
const MAX_LIST_PAGES = 32;

export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface McpConnectionOptions {
  readonly url: string;
  /** The server's credentials: sent on every request to it, and nowhere else. */
  readonly headers: Readonly<Record<string, string>>;
  /** The network, passed in (the thread's, guarded by the outbound URL policy). */
  readonly fetch: FetchLike;
  /** Bound on one request to the server. */
  readonly timeoutMs: number;
  /** The server said its tools changed (`notifications/tools/list_changed`). */
  readonly onToolsChanged?: () => void;
}

type Sdk = typeof import("./sdk/entry.ts");
type Client = InstanceType<Sdk["Client"]>;

let sdk: Promise<Sdk> | undefined;

/**
 * The official SDK (`@modelcontextprotocol/sdk` 1.x), loaded the first time a thread talks to a
 * server: an isolate whose threads use none never evaluates it. It is bundled on its own
 * (`sdk/entry.ts`, with its own zod), so it shares no module with the rest of the worker.
 */
function loadSdk(): Promise<Sdk> {
  sdk ??= import("./sdk/bundle.js");
  return sdk;
}

/**
 * One thread instance's session with one MCP server over Streamable HTTP (the protocol version
 * negotiated by `initialize`; the session id kept by the transport). Connected on first use; a
 * session the server ended (404, as after it restarted) is opened again once for a listing, never
 * for a call: a call is sent at most once (design invariant 15).
 */
export class McpConnection {
  readonly #options: McpConnectionOptions;
  #client: Promise<Client> | undefined;
  #protocolVersion: string | undefined;

  constructor(options: McpConnectionOptions) {
    this.#options = options;
  }

  /** The negotiated protocol version, once connected. */
  get protocolVersion(): string | undefined {
    return this.#protocolVersion;
  }

  /** Every tool the server lists, all pages. */
  async listTools(signal?: AbortSignal): Promise<McpListedTool[]> {
    try {
      return await this.#listAll(await this.#connected(), signal);
    } catch (err) {
      if (!(await this.#sessionEnded(err))) throw err;
      await this.close();
      return this.#listAll(await this.#connected(), signal);
    }
  }

  /** Calls `tool` once; a timeout or an abort also tells the server (`notifications/cancelled`). */
  async callTool(
    tool: string,
    args: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<McpCallToolResult> {
    const client = await this.#connected();
    try {
      return (await client.callTool({ name: tool, arguments: args }, undefined, {
        timeout: this.#options.timeoutMs,
        ...(signal === undefined ? {} : { signal }),
      })) as McpCallToolResult;
    } catch (err) {
      // The next request opens a new session; this call is not sent again.
      if (await this.#sessionEnded(err)) await this.close();
      throw err;
    }
  }

  /** Ends the session (the server is told with a DELETE where it keeps sessions). */
  async close(): Promise<void> {
    const pending = this.#client;
    this.#client = undefined;
    this.#protocolVersion = undefined;
    const client = await pending?.catch(() => undefined);
    if (client === undefined) return;
    const transport = client.transport as { terminateSession?: () => Promise<void> } | undefined;
    await transport?.terminateSession?.().catch(() => undefined);
    await client.close().catch(() => undefined);
  }

  async #listAll(client: Client, signal: AbortSignal | undefined): Promise<McpListedTool[]> {
    const tools: McpListedTool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_LIST_PAGES; page++) {
      const answer = await client.listTools(cursor === undefined ? {} : { cursor }, {
        timeout: this.#options.timeoutMs,
        ...(signal === undefined ? {} : { signal }),
      });
      tools.push(...answer.tools);
      cursor = answer.nextCursor;
      if (cursor === undefined) return tools;
    }
    throw new Error(`tools/list went on for more than ${MAX_LIST_PAGES} pages`);
  }

  #connected(): Promise<Client> {
    this.#client ??= this.#connect().catch((err: unknown) => {
      this.#client = undefined;
      throw err;
    });
    return this.#client;
  }

  async #connect(): Promise<Client> {
    const {
      Client,
      StreamableHTTPClientTransport,
      CfWorkerJsonSchemaValidator,
      ToolListChangedNotificationSchema,
    } = await loadSdk();
    const options = this.#options;
    const transport = new StreamableHTTPClientTransport(new URL(options.url), {
      requestInit: { headers: { ...options.headers }, redirect: "manual" },
      fetch: guardedFetch(options.fetch),
    });
    // Workers refuse code generation: the SDK's default validator (Ajv) compiles with it.
    const client = new Client(
      { name: "spindle", version: "1" },
      { capabilities: {}, jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
    );
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      options.onToolsChanged?.();
    });
    await client.connect(transport, { timeout: options.timeoutMs });
    this.#protocolVersion = transport.protocolVersion;
    return client;
  }

  async #sessionEnded(err: unknown): Promise<boolean> {
    const { StreamableHTTPError } = await loadSdk();
    return err instanceof StreamableHTTPError && err.code === 404;
  }
}

/**
 * The fetch the transport uses: no standalone GET stream (answered 405, which the SDK reads as
 * "none offered": it would hold a connection and keep a Durable Object from hibernating; a
 * server's `list_changed` still arrives on the answers to requests), redirects refused, and every
 * answer cut off past `MAX_MCP_RESPONSE_BYTES`.
 */
export function guardedFetch(fetch: FetchLike): FetchLike {
  return async (input, init) => {
    if ((init?.method ?? "GET").toUpperCase() === "GET") {
      return new Response(null, { status: 405 });
    }
    const answer = await fetch(input, { ...init, redirect: "manual" });
    if (answer.status >= 300 && answer.status < 400) {
      await answer.body?.cancel();
      throw new Error(
        `the MCP server answered ${answer.status} (a redirect, which is not followed)`,
      );
    }
    if (answer.body === null) return answer;
    const head = { status: answer.status, statusText: answer.statusText, headers: answer.headers };
    // A JSON answer ends: read whole, it reaches the SDK as a native body (cheaper in workerd than
    // a body through a JS stream). An SSE answer is counted as it streams: the result must reach
    // the SDK as it comes, whether or not the server closes the stream after it.
    if (answer.headers.get("content-type")?.startsWith("application/json")) {
      return new Response(await readCapped(answer.body, MAX_MCP_RESPONSE_BYTES), head);
    }
    return new Response(answer.body.pipeThrough(byteCap(MAX_MCP_RESPONSE_BYTES)), head);
  };
}

/** The whole body, or an error once it passes `maxBytes`. */
async function readCapped(body: ReadableStream<Uint8Array>, maxBytes: number): Promise<Uint8Array> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let seen = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += value.byteLength;
    if (seen > maxBytes) {
      await reader.cancel();
      throw new Error(`the MCP server's answer passed ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(seen);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}

function byteCap(maxBytes: number): TransformStream<Uint8Array, Uint8Array> {
  let seen = 0;
  return new TransformStream({
    transform(chunk, controller) {
      seen += chunk.byteLength;
      if (seen > maxBytes) {
        controller.error(new Error(`the MCP server's answer passed ${maxBytes} bytes`));
        return;
      }
      controller.enqueue(chunk);
    },
  });
}
