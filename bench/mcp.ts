/**
 * `npm run bench:mcp`: what server-side MCP tools (design §16) cost, over loopback sockets to the
 * worker as `npm start` runs it and to two MCP servers (the official SDK's, as the suites run
 * it). Numbers are printed (and written to bench/results-mcp.md), never asserted. Two
 * measurements:
 *
 * 1. The time an MCP call adds over the server's own time: for BENCH_MCP_CALLS (100) turns that
 *    each call `echo`, the thread's `mcp_tool_call_end` duration (1 ms resolution, the runtime's
 *    clock) minus the time the server took for that `tools/call` request, from its arrival to
 *    the end of its answer.
 * 2. A warm turn on a thread with two MCP servers (listing cache fresh) against the same turn on a
 *    thread without servers, interleaved (BENCH_MCP_TURNS, 100 each).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { McpConnection } from "../shared/mcp/connection.ts";
import { startLocalWorker } from "../test/e2e/local-worker.ts";
import { listenOnLoopback } from "../test/helpers/mcp-http.ts";
import { MCP_TOKEN, testMcpServer } from "../test/helpers/mcp-server.ts";
import { timedFetch } from "./harness.ts";
import { median, ms, percentile, positiveInt, ratio, table } from "./stats.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CALLS = positiveInt(process.env.BENCH_MCP_CALLS, 100);
const TURNS = positiveInt(process.env.BENCH_MCP_TURNS, 100);
const WARMUP = 20;
const HEADERS = { authorization: "Bearer sk-local-dev", "content-type": "application/json" };

interface TimedServer {
  readonly url: string;
  /** The time of each `tools/call` the server answered, from its arrival to its answer's end. */
  readonly callMs: number[];
  close(): Promise<void>;
}

/** Calls as a client saw them, the server's time for each, and the difference. */
interface Sample {
  readonly call: number[];
  readonly server: number[];
  readonly added: number[];
}

const mean = (values: readonly number[]) =>
  values.reduce((sum, v) => sum + v, 0) / Math.max(1, values.length);

function sampleOf(call: number[], server: readonly number[]): Sample {
  return { call, server: [...server], added: call.map((d, i) => d - (server[i] ?? Number.NaN)) };
}

/** A loopback MCP server that times each `tools/call` it answers. */
async function timedServer(jsonAnswers = false): Promise<TimedServer> {
  const callMs: number[] = [];
  let server = testMcpServer("http://127.0.0.1:1/mcp", MCP_TOKEN, jsonAnswers);
  const listening = await listenOnLoopback(async (request) => {
    const body = request.method === "POST" ? await request.clone().text() : "";
    const start = performance.now();
    const response = await server.fetch(request);
    if (!body.includes('"tools/call"')) return response;
    const text = await response.text();
    callMs.push(performance.now() - start);
    return new Response(text, { status: response.status, headers: response.headers });
  });
  server = testMcpServer(`${listening.origin}/mcp`, MCP_TOKEN, jsonAnswers);
  return { url: `${listening.origin}/mcp`, callMs, close: () => listening.close() };
}

const persist = mkdtempSync(join(tmpdir(), "spindle-bench-mcp-"));
const worker = await startLocalWorker(persist);
// `a` answers as SSE streams (the SDK server's default), `b` with JSON bodies.
const [a, b] = [await timedServer(), await timedServer(true)];
const api = (method: string, path: string, body?: unknown, status = 200) =>
  timedFetch(
    new URL(path, worker.url),
    { method, headers: HEADERS, ...(body === undefined ? {} : { body: JSON.stringify(body) }) },
    status,
  );

try {
  for (const [label, server] of [
    ["bench-a", a],
    ["bench-b", b],
  ] as const) {
    await api(
      "POST",
      "/v1/mcp-servers",
      {
        label,
        url: server.url,
        headers: { authorization: `Bearer ${MCP_TOKEN}` },
        require_approval: "never",
      },
      201,
    );
  }
  await api("POST", "/v1/threads", { id: "plain" }, 201);
  await api("POST", "/v1/threads", { id: "servers", mcp_servers: ["bench-a", "bench-b"] }, 201);

  /** CALLS calls of `echo` by turns of a thread naming `label`: the thread's duration of each. */
  async function threadCalls(label: string, server: TimedServer): Promise<Sample> {
    const thread = `calls-${label}`;
    await api("POST", "/v1/threads", { id: thread, mcp_servers: [label] }, 201);
    const turn = (i: string) =>
      api("POST", `/v1/threads/${thread}/turns`, {
        input: `/call mcp__${label}__echo {"text":"${i}"}`,
      });
    for (let i = 0; i < WARMUP; i++) await turn(`w${i}`);
    server.callMs.splice(0);
    for (let i = 0; i < CALLS; i++) {
      const { status } = JSON.parse((await turn(`t${i}`)).body) as { status: string };
      if (status !== "completed") throw new Error(`a call turn ended ${status}`);
    }
    const ends: number[] = [];
    for (const line of (await api("GET", `/v1/threads/${thread}/rollout`)).body
      .trim()
      .split("\n")) {
      const { type, payload } = JSON.parse(line) as {
        type: string;
        payload: { type?: string; duration_ms?: number };
      };
      if (type === "event_msg" && payload.type === "mcp_tool_call_end") {
        ends.push(payload.duration_ms ?? Number.NaN);
      }
    }
    return sampleOf(ends.slice(-CALLS), server.callMs);
  }

  /**
   * The same calls from Node with the same client (`McpConnection`): the SDK and a loopback
   * exchange outside the runtime, without its fetch or the begin line.
   */
  async function nodeCalls(server: TimedServer): Promise<Sample> {
    const direct = new McpConnection({
      url: server.url,
      headers: { authorization: `Bearer ${MCP_TOKEN}` },
      fetch: (input, init) => fetch(input, init),
      timeoutMs: 10_000,
    });
    for (let i = 0; i < WARMUP; i++) await direct.callTool("echo", { text: `w${i}` });
    server.callMs.splice(0);
    const took: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const start = performance.now();
      await direct.callTool("echo", { text: `n${i}` });
      took.push(performance.now() - start);
    }
    await direct.close();
    return sampleOf(took, server.callMs);
  }

  // 1. The time a call adds.
  const rows: [string, Sample][] = [
    ["a thread, SSE answers", await threadCalls("bench-a", a)],
    ["a thread, JSON answers", await threadCalls("bench-b", b)],
    ["Node, SSE answers", await nodeCalls(a)],
    ["Node, JSON answers", await nodeCalls(b)],
  ];

  // 2. A warm turn with two servers against one without.
  for (let i = 0; i < WARMUP; i++) {
    await api("POST", "/v1/threads/plain/turns", { input: `warm ${i}` });
    await api("POST", "/v1/threads/servers/turns", { input: `warm ${i}` });
  }
  const plain: number[] = [];
  const servers: number[] = [];
  for (let i = 0; i < TURNS; i++) {
    plain.push((await api("POST", "/v1/threads/plain/turns", { input: `hello ${i}` })).ms);
    servers.push((await api("POST", "/v1/threads/servers/turns", { input: `hello ${i}` })).ms);
  }

  const report = [
    "# MCP tools: benchmark results",
    "",
    `\`npm run bench:mcp\` on ${cpus().length} cores (load ${loadavg()[0]?.toFixed(2)}), worker as \`npm start\` runs it, two loopback MCP servers (the SDK's).`,
    "",
    "## The time an MCP call adds over the server's own time",
    "",
    table(
      [
        "calls (each kind)",
        "call p50",
        "server's time p50",
        "added p50",
        "added mean",
        "added p90",
      ],
      rows.map(([what, x]) => [
        `${x.call.length} by ${what}`,
        ms(median(x.call)),
        ms(median(x.server)),
        ms(median(x.added)),
        ms(mean(x.added)),
        ms(percentile(x.added, 90)),
      ]),
    ),
    "",
    "A thread's figure is whole milliseconds (the runtime's clock), so its `added` p50 is ±1 ms;",
    "the mean, over calls that land on either side of a millisecond, is the finer figure. The",
    "Node rows are the same client (`McpConnection`) calling the same servers from outside the",
    "runtime: the SDK and a loopback exchange, without the runtime's fetch or the begin line. The",
    "SSE server answers each request as a stream (the SDK server's default), the JSON one with one",
    "body (`enableJsonResponse`); both are Streamable HTTP.",
    "",
    "## A warm turn with two MCP servers (listing cache fresh) against one without",
    "",
    table(
      [
        "turns each",
        "no servers p50",
        "two servers p50",
        "ratio p50",
        "no servers p90",
        "two servers p90",
      ],
      [
        [
          String(TURNS),
          ms(median(plain)),
          ms(median(servers)),
          ratio(median(servers), median(plain)),
          ms(percentile(plain, 90)),
          ms(percentile(servers, 90)),
        ],
      ],
    ),
    "",
  ].join("\n");
  console.log(report);
  writeFileSync(`${ROOT}bench/results-mcp.md`, report);
} finally {
  await worker.dispose();
  await a.close();
  await b.close();
  rmSync(persist, { recursive: true, force: true });
}
