/**
 * The inspector page (`GET /inspect`, docs/inspector.md) in a real headless Chromium against a
 * real workerd: sign in, a wrong key, the thread list, a thread, a tool call beside its output, a
 * turn appearing live, and (with the turn list and requests routes) a request's new items.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "puppeteer-core";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { call, DEV_KEY, type LocalWorker, startLocalWorker } from "../e2e/local-worker.ts";
import { launchChromium, type PageElement, screenshot } from "./chromium.ts";

/** The page's document, in callbacks that run in the browser. */
declare const document: PageElement;

let worker: LocalWorker;
let browser: Browser;
let page: Page;
let persist: string;

beforeAll(async () => {
  // The browser first: without one the suite fails at once with how to install it.
  browser = await launchChromium();
  persist = mkdtempSync(join(tmpdir(), "spindle-browser-"));
  worker = await startLocalWorker(persist);
});

afterAll(async () => {
  await browser?.close();
  await worker?.dispose();
  if (persist) rmSync(persist, { recursive: true, force: true });
});

beforeEach(async ({ task, onTestFailed }) => {
  // The previous test's page stays open until now: a failure's screenshot is taken after the
  // test's hooks have run.
  await page?.close();
  page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  // Any script error or CSP violation on the page is a failure of the test.
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(String(err)));
  page.on("console", (msg) => {
    // A refused request is logged by the browser too; the page shows its own message for those.
    if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource")) {
      errors.push(msg.text());
    }
  });
  onTestFailed(async () => {
    const path = await screenshot(page, task.name);
    console.error(`screenshot: ${path}`);
    if (errors.length) console.error(`page errors:\n${errors.join("\n")}`);
  });
  return () => {
    expect(errors).toEqual([]);
  };
});

const url = (path: string) => new URL(path, worker.url).href;

async function json<T>(res: Response, status = 200): Promise<T> {
  const body = await res.text();
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${body}`);
  return JSON.parse(body) as T;
}

interface Turn {
  id: string;
  status: string;
  pending_calls: { call_id: string; name: string }[];
}

async function createThread(id: string, body: Record<string, unknown> = {}) {
  await json(await call(worker.url, "POST", "/v1/threads", { id, ...body }), 201);
}

async function turn(threadId: string, input: string): Promise<Turn> {
  return json<Turn>(await call(worker.url, "POST", `/v1/threads/${threadId}/turns`, { input }));
}

/** Opens the page and signs in with `key`. */
async function signIn(key = DEV_KEY, hash = "") {
  await page.goto(url(`/inspect/${hash}`));
  await page.waitForSelector("#key");
  await page.type("#key", key);
  await page.keyboard.press("Enter");
}

const textOf = (selector: string) =>
  page.$eval(selector, (el) => (el as unknown as PageElement).textContent).catch(() => "");

async function waitForText(selector: string, text: string) {
  await page
    .waitForFunction(
      (sel, want) =>
        [...document.querySelectorAll(sel)].some((el) =>
          (el as unknown as PageElement).textContent?.includes(want),
        ),
      { timeout: 15_000 },
      selector,
      text,
    )
    .catch(async () => {
      throw new Error(`no ${selector} showed “${text}”; it shows: ${await textOf(selector)}`);
    });
}

describe("the inspector page", () => {
  it("is served with a policy that allows only its own scripts", async () => {
    const res = await fetch(url("/inspect/"));
    expect(res.status).toBe(200);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    // `/inspect` itself leads there; the type declarations for the unit tests are not served.
    expect((await fetch(url("/inspect"), { redirect: "manual" })).headers.get("location")).toBe(
      "/inspect/",
    );
    expect((await fetch(url("/inspect/model.d.ts"))).status).toBe(404);
  });

  it("answers a wrong key with a clear message and keeps nothing", async () => {
    await signIn("sk-not-a-key");
    await waitForText("#sign-in-status", "That key was not accepted");
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect(page.url()).not.toContain("sk-not-a-key");
  });

  it("signs in, lists and searches threads by metadata, and signs out", async () => {
    await createThread("list-a", { metadata: { team: "red" } });
    await createThread("list-b", { metadata: { team: "blue" } });
    await signIn();
    // The index follows creates within about a second.
    await waitForText("#thread-results", "list-b");
    expect(page.url()).not.toContain(DEV_KEY);
    expect(await page.evaluate(() => sessionStorage.getItem("spindle.inspector.key"))).toBe(
      DEV_KEY,
    );
    await page.type("#search-metadata", "team=red");
    await page.click("form[role=search] button");
    await page.waitForFunction(
      () => !document.querySelector("#thread-results")?.textContent?.includes("list-b"),
    );
    expect(await textOf("#thread-results")).toContain("list-a");
    await page.click("#sign-out");
    await page.waitForSelector("#key");
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  });

  it("opens a thread by id", async () => {
    await createThread("by-id");
    await turn("by-id", "hello there");
    await signIn();
    await page.waitForSelector("#open-id");
    await page.type("#open-id", "by-id");
    await page.keyboard.press("Enter");
    await waitForText("h1", "by-id");
    await waitForText("#turn-list", "completed");
    await waitForText("#turn-detail", "hello there");
  });

  it("shows a tool call beside its output", async () => {
    await createThread("tools", { tools: [{ name: "lookup", description: "search" }] });
    const paused = await turn("tools", '/call lookup {"q":"x"}');
    expect(paused.status).toBe("requires_action");
    const callId = paused.pending_calls[0]?.call_id;
    await json(
      await call(worker.url, "POST", `/v1/threads/tools/turns/${paused.id}/outputs`, {
        items: [{ type: "function_call_output", call_id: callId, output: "42 results" }],
      }),
    );
    await signIn(DEV_KEY, `#/thread/tools/turn/${paused.id}`);
    await page.waitForSelector(`#turn-detail .tool-pair[data-call-id="${callId}"]`);
    const pair = await page.$eval(`#turn-detail .tool-pair[data-call-id="${callId}"]`, (el) => ({
      call: (el as unknown as PageElement).querySelector(".call")?.textContent,
      output: (el as unknown as PageElement).querySelector(".output")?.textContent,
    }));
    expect(pair.call).toContain("lookup");
    expect(pair.call).toContain('{"q":"x"}');
    expect(pair.output).toContain("42 results");
    expect(pair.output).not.toContain("synthetic");
  });

  it("shows a new turn as it happens", async () => {
    await createThread("live");
    await turn("live", "first");
    await signIn(DEV_KEY, "#/thread/live");
    await page.waitForSelector('#live-status[data-state="live"]');
    const next = await turn("live", "second, while you watch");
    await page.waitForSelector(`#turn-list button[data-turn-id="${next.id}"]`, { timeout: 15_000 });
    await waitForText(`#turn-list`, "second, while you watch");
  });
});

/**
 * These need `GET /v1/threads/{id}/turns` (the turn list) and `GET …/turns/{turn}/requests`
 * (each provider request of a turn); they run wherever the server has both.
 */
describe("the inspector with the turn list and requests routes", () => {
  it("lists every turn, the chart included, newest first", async () => {
    await createThread("timeline");
    for (const text of ["t-one", "t-two", "t-three"]) await turn("timeline", text);
    await signIn(DEV_KEY, "#/thread/timeline");
    await page.waitForFunction(
      () => document.querySelectorAll("#turn-list button.turn").length === 3,
    );
    const previews = await page.$$eval("#turn-list button.turn .preview:not(.out)", (els) =>
      els.map((el) => (el as unknown as PageElement).textContent ?? ""),
    );
    expect(previews.map((p) => p.replace("› ", ""))).toEqual(["t-three", "t-two", "t-one"]);
    await page.waitForSelector("#usage-chart svg rect");
  });

  it("marks a rollback below the turn that follows it", async () => {
    await createThread("rolled");
    await turn("rolled", "kept");
    await turn("rolled", "dropped");
    await json(await call(worker.url, "POST", "/v1/threads/rolled/rollback", { turns: 1 }));
    const after = await turn("rolled", "after the rollback");
    await signIn(DEV_KEY, "#/thread/rolled");
    await page.waitForSelector("#turn-list li.rollback");
    // Newest first: the turn after the rollback, the marker, then the turns before it.
    const rows = await page.$$eval("#turn-list > li", (els) =>
      els.map((el) => ({
        rollback: (el as unknown as PageElement).classList.contains("rollback"),
        text: (el as unknown as PageElement).textContent ?? "",
        at: (el as unknown as PageElement).querySelector("time")?.getAttribute("datetime"),
      })),
    );
    expect(rows.map((r) => r.rollback)).toEqual([false, true, false, false]);
    expect(rows[0]?.text).toContain(after.id);
    expect(rows[1]?.text).toContain("Rolled back 1 turn");
    expect(Date.parse(rows[1]?.at ?? "")).not.toBeNaN();
    expect(rows[2]?.text).toContain("dropped");
  });

  it("moves between turns with the keyboard", async () => {
    await createThread("keys");
    const one = await turn("keys", "one");
    await turn("keys", "two");
    await signIn(DEV_KEY, "#/thread/keys");
    await page.waitForFunction(
      () => document.querySelectorAll("#turn-list button.turn").length === 2,
    );
    // Newest first: the first button is turn two; the arrow moves to turn one.
    await page.focus("#turn-list button.turn");
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("Enter");
    await waitForText("#turn-detail h2", one.id);
    await page.waitForSelector(`#turn-list button[data-turn-id="${one.id}"][aria-pressed="true"]`);
  });

  it("highlights turn 2's new items in its request", async () => {
    await createThread("requests", { cwd: "/repo" });
    await turn("requests", "the first question");
    const second = await turn("requests", "the second question");
    await signIn(DEV_KEY, `#/thread/requests/turn/${second.id}`);
    await page.waitForSelector("#turn-detail .request-tab");
    await page.click('#turn-detail .request-tab[data-step="1"]');
    await page.waitForSelector("#turn-detail .request .items .item.new");
    // What the previous request sent too is folded away until asked for.
    expect(await page.$$("#turn-detail .request details.reused .item")).toHaveLength(0);
    await page.click("#turn-detail .request details.reused summary");
    await page.waitForSelector("#turn-detail .request details.reused .item");
    const items = await page.$$eval("#turn-detail .request .items .item", (els) =>
      els.map((el) => ({
        isNew: (el as unknown as PageElement).classList.contains("new"),
        kind: (el as unknown as PageElement).querySelector(".kind")?.textContent,
        text: (el as unknown as PageElement).querySelector("pre")?.textContent,
      })),
    );
    const users = (isNew: boolean) =>
      items.filter((i) => i.isNew === isNew && i.kind === "user").map((i) => i.text);
    // New since turn 1's request: turn 1's answer, then turn 2's input; turn 1's input is not.
    expect(users(true)).toEqual(["the second question"]);
    expect(users(false)).toContain("the first question");
    expect(items.filter((i) => i.isNew).map((i) => i.kind)).toEqual(["assistant", "user"]);
    // The initial context came with turn 1 and is labelled by its section.
    await page.waitForSelector('#turn-detail .request .item.context[data-section="environments"]');
    // Instructions and tools are there, collapsed.
    expect(
      await page.$eval("#turn-detail details.instructions", (el) =>
        (el as unknown as PageElement).hasAttribute("open"),
      ),
    ).toBe(false);
    await waitForText("#turn-detail details.raw summary", "Raw rollout lines");
  });

  it("shows an abandoned call's output as synthetic in the next request", async () => {
    await createThread("aborted", { tools: [{ name: "lookup", description: "search" }] });
    const paused = await turn("aborted", '/call lookup {"q":"y"}');
    expect(paused.status).toBe("requires_action");
    const next = await turn("aborted", "never mind");
    await signIn(DEV_KEY, `#/thread/aborted/turn/${next.id}`);
    await page.waitForSelector("#turn-detail .request .tool-pair .badge-synthetic");
    await waitForText("#turn-detail .request .tool-pair", "aborted");
  });
});
