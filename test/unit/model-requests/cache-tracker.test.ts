import { describe, expect, it } from "vitest";
import type { CacheReport } from "../../../shared/api/index.ts";
import {
  CacheTracker,
  newestRequest,
  type RequestHead,
  type RequestMemory,
  type RunMark,
} from "../../../shared/model-requests/index.ts";
import {
  modelVisibleItem,
  type ResponseItem,
  type RolloutItem,
  requestUsage,
  type ThreadConfig,
  type TokenUsage,
} from "../../../shared/protocol/index.ts";
import { MemoryRolloutSink, truncationPolicyOf } from "../../../shared/session/index.ts";
import {
  drain,
  type Harness,
  LOOKUP_TOOL,
  newSession,
  replayed,
  runTurn,
  T0,
} from "../helpers/engine.ts";
import { allRequests, EVERY_BREAK, linesOf, runEveryBreak } from "../helpers/model-requests.ts";

/** A `RequestMemory` in a map, as SQLite keeps it: a head and numbered parts. */
class MapMemory implements RequestMemory {
  stored: RequestHead | null | undefined;
  readonly texts = new Map<number, string>();
  runs: RunMark[] = [];
  /** How many parts each write replaced. */
  readonly written: number[] = [];

  head() {
    return this.stored;
  }

  parts(from: number, to: number): string[] {
    return Array.from({ length: to - from }, (_, k) => {
      const text = this.texts.get(from + k);
      if (text === undefined) throw new Error(`part ${from + k} is not kept`);
      return text;
    });
  }

  marks(): RunMark[] {
    return [...this.runs];
  }

  write(
    head: RequestHead | null,
    changed: ReadonlyMap<number, string>,
    marks?: readonly RunMark[],
  ) {
    for (const i of [...this.texts.keys()]) if (i >= (head?.parts ?? 0)) this.texts.delete(i);
    for (const [i, text] of changed) this.texts.set(i, text);
    this.stored = head;
    if (marks !== undefined) this.runs = [...marks];
    this.written.push(changed.size);
  }

  /** What a thread that was imported or restored keeps: nothing. */
  forget() {
    this.stored = undefined;
    this.texts.clear();
    this.runs = [];
  }
}

/**
 * An engine whose lines a `CacheTracker` follows as the Thread DO's does: line `i` (from 0) is
 * seq `i + 1` written at `T0 + i` seconds (as `linesOf` stamps them), each request's usage read
 * off its `token_count` line as the ledger reads it. `reload` starts a new tracker over the same
 * memory, as a reloaded object does.
 */
function liveThread(config: ThreadConfig, ttlS: number | null = null) {
  const memory = new MapMemory();
  const ttl = () => ttlS;
  const reports: (CacheReport | null)[] = [];
  let tracker = new CacheTracker(memory, ttl);
  let total: TokenUsage | undefined;
  const sink = new MemoryRolloutSink();
  const append = sink.append.bind(sink);
  sink.append = (item: RolloutItem) => {
    append(item);
    let usage: TokenUsage | undefined;
    if (item.type === "event_msg" && item.payload.type === "token_count" && item.payload.info) {
      usage = requestUsage(total, item.payload.info);
      total = item.payload.info.total_token_usage;
    }
    tracker.observe(item, usage);
    if (item.type === "event_msg" && item.payload.type === "token_count") {
      reports.push(tracker.takeReport());
    }
  };
  const h = newSession(config, 1000, {
    sink,
    requestSent: (request) =>
      tracker.sent(sink.items.length, T0 + (sink.items.length - 1) * 1000, request),
  });
  tracker.none();
  return {
    h,
    memory,
    reports,
    get tracker() {
      return tracker;
    },
    reload(next: Harness) {
      tracker = new CacheTracker(memory, ttl);
      return next;
    },
  };
}

describe("the live cache report", () => {
  it("is the report the rollout gives, request for request, across reloads, a rollback and every break", async () => {
    const live = liveThread({ cwd: "/repo", tools: [LOOKUP_TOOL] });
    // Each reload is an eviction: the next request compares with the one the memory kept.
    const h = await runEveryBreak(live.h, (next) => live.reload(replayed(next)));
    const rebuilt = allRequests(h).map((r) => r.cache);
    expect(live.reports).toEqual(rebuilt);
    expect(live.reports.map((r) => r?.break_reason)).toEqual(EVERY_BREAK);
    expect(live.reports.every((r) => typeof r?.provider_cached_tokens === "number")).toBe(true);
  });

  it("says expired as the rollout does when the model's cache lifetime passed", async () => {
    // Lines are a second apart: with a lifetime of half a second every request is too late.
    const live = liveThread({ cwd: "/repo" }, 0.5);
    await runTurn(live.h, "first");
    await runTurn(live.h, "second");
    expect(live.reports.map((r) => r?.break_reason)).toEqual(["first_request", "expired"]);
    expect(live.reports).toEqual(allRequests(live.h, undefined, 0.5).map((r) => r.cache));
  });

  it("keeps only what a request changed: a turn writes the items it added", async () => {
    const live = liveThread({ cwd: "/repo" });
    await runTurn(live.h, "first");
    await runTurn(live.h, "second");
    const [one, two] = allRequests(live.h);
    if (one === undefined || two === undefined) throw new Error("expected two requests");
    // The first request kept all its parts; the second only its new input items.
    expect(live.memory.written.at(-2)).toBe(one.input.length + 2);
    expect(live.memory.written.at(-1)).toBe(two.input.length - one.input.length);
    expect(live.memory.stored).toMatchObject({ parts: two.input.length + 2, model: two.model });
  });

  it("marks a stored run where the newest request holds it, and keeps the mark while the run's own parts are unchanged", async () => {
    const live = liveThread({ cwd: "/repo" });
    await runTurn(live.h, "first");
    await runTurn(live.h, "second");
    const items = live.h.client.received.at(-1)?.input.slice(0, 3) ?? [];
    live.tracker.stored(items, "k1");
    const bytes = items.reduce(
      (sum, item) => sum + new TextEncoder().encode(JSON.stringify(modelVisibleItem(item))).length,
      0,
    );
    expect(live.memory.runs).toEqual([{ at: 2, count: 3, key: "k1", bytes }]);
    // Items that are not, object for object, the request's are not marked.
    live.tracker.stored([structuredClone(items[0] as ResponseItem)], "k2");
    expect(live.memory.runs.map((m) => m.key)).toEqual(["k1"]);
    // New instructions change part 0, not the run's parts.
    await runTurn(live.h, "told otherwise", { base_instructions: "Answer briefly." });
    expect(live.memory.runs.map((m) => m.key)).toEqual(["k1"]);
    // The summary request still holds it; the request after the compaction does not.
    await drain(live.h.session.compact("manual"));
    expect(live.memory.runs.map((m) => m.key)).toEqual(["k1"]);
    await runTurn(live.h, "after the summary");
    expect(live.memory.runs).toEqual([]);
  });

  it("compares with the request the rollout rebuilds when the memory keeps nothing (an import, a restore)", async () => {
    const live = liveThread({ cwd: "/repo", tools: [LOOKUP_TOOL] });
    let h = live.h;
    await runTurn(h, "first");
    await runTurn(h, "to be rolled back");
    h.session.recordRollback(1);
    live.memory.forget();
    h = live.reload(replayed(h));
    expect(live.tracker.needsRebuild).toBe(true);
    const opts = { truncation: truncationPolicyOf(h.session.state.config), cacheTtlS: () => null };
    live.tracker.remember(newestRequest(linesOf(h.sink.items), opts));
    expect(live.tracker.needsRebuild).toBe(false);
    await runTurn(h, "after the import");
    expect(live.reports.at(-1)?.break_reason).toBe("rollback");
    expect(live.reports).toEqual(allRequests(h).map((r) => r.cache));
  });

  it("reports null for the one request whose predecessor is unknown, and whole ones after it", async () => {
    const live = liveThread({ cwd: "/repo" });
    let h = live.h;
    await runTurn(h, "first");
    live.memory.forget();
    h = live.reload(replayed(h));
    await runTurn(h, "second");
    await runTurn(h, "third");
    const rebuilt = allRequests(h).map((r) => r.cache);
    expect(live.reports).toEqual([rebuilt[0], null, rebuilt[2]]);
  });

  it("a thread that has sent nothing reports its first request as the first, and a rollout without requests rebuilds none", async () => {
    expect(
      newestRequest([], { truncation: { mode: "bytes", limit: 10 }, cacheTtlS: () => null }),
    ).toBeNull();
    const memory = new MapMemory();
    const tracker = new CacheTracker(memory, () => null);
    expect(tracker.needsRebuild).toBe(true);
    tracker.remember(null);
    expect(tracker.needsRebuild).toBe(false);
    expect(new CacheTracker(memory, () => null).needsRebuild).toBe(false);
    // A count that answers no request carries no report.
    tracker.observe(
      { type: "event_msg", payload: { type: "token_count", info: null, rate_limits: null } },
      undefined,
    );
    expect(tracker.takeReport()).toBeNull();
  });
});
