/**
 * `npm run bench:inspector`: the inspector page (docs/inspector.md) in headless Chromium against
 * a local worker: the time to open a 1,000-turn thread (its page shows the turn list and the
 * newest turn's detail) and to render one request of a turn. The thread is imported from a
 * generated rollout, the fastest way to make one that long. Numbers are printed, never asserted.
 * Writes `results-inspector.md`, and docs/inspector.png: the page on a small thread with a tool call.
 *
 * Knobs (environment): BENCH_INSPECTOR_TURNS (1000), BENCH_INSPECTOR_REPEATS (5).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Page } from "puppeteer-core";
import { launchChromium, type PageElement } from "../test/browser/chromium.ts";
import { call, DEV_KEY, startLocalWorker } from "../test/e2e/local-worker.ts";
import { median, ms, positiveInt, table } from "./stats.ts";

const TURNS = positiveInt(process.env.BENCH_INSPECTOR_TURNS, 1000);
/** The page's document, in callbacks that run in the browser. */
declare const document: PageElement;

const REPEATS = positiveInt(process.env.BENCH_INSPECTOR_REPEATS, 5);
const SCREENSHOT = fileURLToPath(new URL("../docs/inspector.png", import.meta.url));
const RESULTS = fileURLToPath(new URL("./results-inspector.md", import.meta.url));

async function ok(res: Response, status = 200): Promise<Response> {
  if (res.status !== status)
    throw new Error(`expected ${status}, got ${res.status}: ${await res.text()}`);
  return res;
}

const persist = mkdtempSync(join(tmpdir(), "spindle-bench-inspector-"));
const worker = await startLocalWorker(persist);
const browser = await launchChromium();
try {
  const post = (path: string, body?: unknown) => call(worker.url, "POST", path, body);

  // A two-turn thread, exported: its second turn is the template of each generated turn.
  await ok(await post("/v1/threads", { id: "template" }), 201);
  for (const input of ["first", "a turn of the long thread"]) {
    await ok(await post("/v1/threads/template/turns", { input }));
  }
  const exported = (
    await (await ok(await call(worker.url, "GET", "/v1/threads/template/rollout"))).text()
  )
    .trimEnd()
    .split("\n");
  const starts = exported.flatMap((line, i) => (line.includes('"type":"task_started"') ? [i] : []));
  const head = exported.slice(0, starts[1]);
  const template = exported.slice(starts[1]).join("\n");
  const turnId = /"turn_id":"([^"]+)"/.exec(template)?.[1] ?? "";
  const body = [head.join("\n")];
  for (let i = 0; i < TURNS; i++) {
    const n = String(i).padStart(5, "0");
    // Each turn and each item gets its own id; the rest is the template's, byte for byte.
    body.push(
      template
        .replaceAll(turnId, `turn_bench_${n}`)
        .replace(/"id":"msg_([^"]+)"/g, (_, id) => `"id":"msg_${id.slice(0, 20)}${n}"`),
    );
  }
  const importStarted = performance.now();
  await ok(
    await fetch(new URL("/v1/threads/import?id=long", worker.url), {
      method: "POST",
      headers: { authorization: `Bearer ${DEV_KEY}`, "content-type": "application/x-ndjson" },
      body: `${body.join("\n")}\n`,
    }),
    201,
  );
  const importMs = performance.now() - importStarted;

  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(new URL("/inspect/", worker.url).href);
  await page.evaluate((key) => sessionStorage.setItem("spindle.inspector.key", key), DEV_KEY);

  /** From navigation to the turn list and the newest turn's detail on screen. */
  async function open(threadId: string): Promise<number> {
    await page.goto("about:blank");
    const started = performance.now();
    await page.goto(new URL(`/inspect/#/thread/${threadId}`, worker.url).href);
    await page.waitForSelector("#turn-list button.turn");
    await page.waitForSelector("#turn-detail h2");
    return performance.now() - started;
  }

  /** From choosing a turn to its first request's input on screen (null: no requests route). */
  async function renderRequest(p: Page): Promise<number | null> {
    const buttons = await p.$$("#turn-list button.turn");
    const target = buttons[buttons.length - 1];
    if (!target) return null;
    const started = performance.now();
    await target.click();
    await p.waitForFunction(
      () =>
        document.querySelector("#turn-detail .request .items") ??
        document.querySelector("#turn-detail .requests .hint"),
      { timeout: 30_000 },
    );
    const elapsed = performance.now() - started;
    return (await p.$("#turn-detail .request .items")) ? elapsed : null;
  }

  const opens: number[] = [];
  const renders: number[] = [];
  let shownTurns = 0;
  for (let i = 0; i < REPEATS; i++) {
    opens.push(await open("long"));
    shownTurns = await page.$$eval("#turn-list button.turn", (els) => els.length);
    const rendered = await renderRequest(page);
    if (rendered !== null) renders.push(rendered);
  }

  const report = [
    `A ${TURNS}-turn thread (imported in ${ms(importMs)}), ${REPEATS} runs, headless ${await browser.version()}.`,
    "",
    table(
      ["measure", "median", "runs"],
      [
        ["open the thread (turn list + newest turn)", ms(median(opens)), opens.map(ms).join(", ")],
        [
          "render one request of a turn",
          renders.length
            ? ms(median(renders))
            : "n/a: the server has no GET …/turns/{turn}/requests",
          renders.map(ms).join(", "),
        ],
      ],
    ),
    "",
    `Turns on screen after opening: ${shownTurns} of ${TURNS} (one page; older ones load as the list scrolls).`,
  ].join("\n");
  console.log(report);
  const date = new Date().toISOString().slice(0, 10);
  writeFileSync(
    RESULTS,
    `# bench:inspector\n\n\`npm run bench:inspector\`, ${date}.\n\n${report}\n`,
  );

  // The screenshot for the docs: a small thread with a tool call and its output.
  await ok(
    await post("/v1/threads", {
      id: "example",
      cwd: "/repo",
      metadata: { team: "docs" },
      tools: [{ name: "lookup", description: "Search the docs" }],
    }),
    201,
  );
  await ok(await post("/v1/threads/example/turns", { input: "What does the inspector show?" }));
  const paused = (await (
    await ok(await post("/v1/threads/example/turns", { input: '/call lookup {"q":"inspector"}' }))
  ).json()) as {
    id: string;
    pending_calls: { call_id: string }[];
  };
  await ok(
    await post(`/v1/threads/example/turns/${paused.id}/outputs`, {
      items: [
        {
          type: "function_call_output",
          call_id: paused.pending_calls[0]?.call_id,
          output: "3 pages found",
        },
      ],
    }),
  );
  await page.goto("about:blank");
  await page.goto(new URL(`/inspect/#/thread/example/turn/${paused.id}`, worker.url).href);
  await page.waitForSelector("#turn-detail .tool-pair");
  await page.screenshot({ path: SCREENSHOT });
  console.log(`screenshot: ${SCREENSHOT}`);
} finally {
  await browser.close();
  await worker.dispose();
  rmSync(persist, { recursive: true, force: true });
}
