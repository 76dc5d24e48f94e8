import type { ModelRequestResource } from "../api/index.ts";
import { ContextManager, type TruncationPolicy } from "../context-manager/index.ts";
import {
  type FunctionTool,
  type KnownResponseItem,
  type ModelRequestLine,
  modelVisibleItem,
  type RolloutLine,
  requestUsage,
  type TokenUsage,
} from "../protocol/index.ts";
import { reconstructRollout } from "../rollout/index.ts";
import { summarizationRequestMessage } from "../session/index.ts";
import {
  type Between,
  type ComparedRequest,
  cacheReport,
  comparedRequest,
  requestTexts,
} from "./cache-report.ts";
import type { RememberedRequest } from "./cache-tracker.ts";

export interface SeqLine {
  readonly seq: number;
  readonly line: RolloutLine;
}

export interface ReplayOptions {
  /** The truncation a turn without a `turn_context` policy recorded its tool outputs with. */
  readonly truncation: TruncationPolicy;
  /** A model's `prompt_cache_ttl_s` (null: unknown). */
  readonly cacheTtlS: (model: string) => number | null;
}

/** A `spindle_request` line with the channels it left out carried from the lines before it. */
interface RequestAt {
  readonly index: number;
  readonly seq: number;
  readonly timestamp: string;
  readonly kind: ModelRequestLine["kind"];
  readonly model: string;
  readonly instructions: string;
  readonly tools: FunctionTool[];
  readonly options: NonNullable<ModelRequestLine["options"]>;
}

const NO_OPTIONS: NonNullable<ModelRequestLine["options"]> = {
  parallel_tool_calls: false,
  input_modalities: ["text"],
};

/** Every request line of `lines`, in order, each with its carried channels. */
function requestLines(lines: readonly SeqLine[]): RequestAt[] {
  const found: RequestAt[] = [];
  let instructions = "";
  let tools: FunctionTool[] = [];
  let options = NO_OPTIONS;
  lines.forEach(({ seq, line }, index) => {
    if (line.type !== "spindle_request") return;
    const p = line.payload;
    instructions = p.instructions ?? instructions;
    tools = p.tools ?? tools;
    options = p.options ?? options;
    found.push({
      index,
      seq,
      timestamp: line.timestamp,
      kind: p.kind,
      model: p.model,
      instructions,
      tools,
      options,
    });
  });
  return found;
}

/** The truncation of the newest `turn_context` before `end` that records one. */
function truncationAt(lines: readonly SeqLine[], end: number, fallback: TruncationPolicy) {
  for (let i = end - 1; i >= 0; i--) {
    const line = lines[i]?.line;
    if (line?.type === "turn_context" && line.payload.truncation_policy) {
      const { mode, limit } = line.payload.truncation_policy;
      return { mode, limit } as TruncationPolicy;
    }
  }
  return fallback;
}

/** The request's input: the history the lines before it rebuild, as the provider got it. */
function inputOf(lines: readonly SeqLine[], at: RequestAt, opts: ReplayOptions) {
  const before = lines.slice(0, at.index).map((l) => l.line);
  const state = reconstructRollout(before, {
    truncation: truncationAt(lines, at.index, opts.truncation),
  });
  const items: KnownResponseItem[] = new ContextManager(state.history).forPrompt(
    at.options.input_modalities,
  );
  if (at.kind === "compaction") items.push(summarizationRequestMessage());
  return items.map(modelVisibleItem);
}

/**
 * What the request used: how far the running total moved at the `token_count` that answers it
 * (`requestUsage`); null when none does before the next request or the turn's end.
 */
function usageAfter(lines: readonly SeqLine[], at: RequestAt): TokenUsage | null {
  for (let i = at.index + 1; i < lines.length; i++) {
    const line = lines[i]?.line;
    if (line === undefined || line.type === "spindle_request") return null;
    if (line.type !== "event_msg") continue;
    const event = line.payload;
    if (event.type === "token_count") {
      return event.info ? requestUsage(totalBefore(lines, at.index), event.info) : null;
    }
    if (event.type === "task_complete" || event.type === "turn_aborted") return null;
  }
  return null;
}

/** The running total of the newest `token_count` before line `end`. */
function totalBefore(lines: readonly SeqLine[], end: number): TokenUsage | undefined {
  for (let i = end - 1; i >= 0; i--) {
    const line = lines[i]?.line;
    if (line?.type === "event_msg" && line.payload.type === "token_count" && line.payload.info) {
      return line.payload.info.total_token_usage;
    }
  }
  return undefined;
}

/** What lines `from` < i < `to` did to history. */
function historyEdits(lines: readonly SeqLine[], from: number, to: number) {
  let compacted = false;
  let rolledBack = false;
  for (let i = from + 1; i < to; i++) {
    const line = lines[i]?.line;
    if (line?.type === "compacted") compacted = true;
    if (line?.type === "event_msg" && line.payload.type === "thread_rolled_back") {
      rolledBack = true;
    }
  }
  return { compacted, rolledBack };
}

/** What the lines strictly between two requests did to history. */
function between(lines: readonly SeqLine[], from: RequestAt, to: RequestAt): Between {
  return {
    ...historyEdits(lines, from.index, to.index),
    afterCompactionRequest: from.kind === "compaction",
  };
}

/**
 * The provider requests recorded in lines `firstSeq`..`lastSeq` (one turn), rebuilt from the
 * rollout (design §13): each one's input is the history its preceding lines rebuild, so nothing
 * but the small `spindle_request` line is stored per request. `lines` runs from the rollout's
 * start through `lastSeq` at least; the request before the turn's first is rebuilt too, for the
 * first one's cache report.
 */
export function turnRequests(
  lines: readonly SeqLine[],
  firstSeq: number,
  lastSeq: number,
  opts: ReplayOptions,
): ModelRequestResource[] {
  const all = requestLines(lines.filter((l) => l.seq <= lastSeq));
  const start = all.findIndex((r) => r.seq >= firstSeq);
  if (start === -1) return [];
  let previous: { at: RequestAt; compared: ComparedRequest } | undefined;
  const earlier = all[start - 1];
  if (earlier !== undefined) previous = { at: earlier, compared: compare(earlier) };
  const out: ModelRequestResource[] = [];
  for (const at of all.slice(start)) {
    const input = inputOf(lines, at, opts);
    const compared = comparedRequest(
      at.model,
      at.instructions,
      at.tools,
      input,
      Date.parse(at.timestamp),
    );
    const usage = usageAfter(lines, at);
    const cache = cacheReport(
      previous?.compared,
      compared,
      previous === undefined ? NOTHING_BETWEEN : between(lines, previous.at, at),
      usage?.cached_input_tokens ?? null,
      opts.cacheTtlS(at.model),
    );
    const { input_modalities: _modalities, ...options } = at.options;
    out.push({
      object: "model.request",
      step: out.length + 1,
      kind: at.kind,
      model: at.model,
      created_at: at.timestamp,
      seq: at.seq,
      instructions: at.instructions,
      input,
      tools: at.tools,
      ...options,
      usage,
      cache,
    });
    previous = { at, compared };
  }
  return out;

  function compare(at: RequestAt): ComparedRequest {
    const input = inputOf(lines, at, opts);
    return comparedRequest(at.model, at.instructions, at.tools, input, Date.parse(at.timestamp));
  }
}

const NOTHING_BETWEEN: Between = {
  compacted: false,
  rolledBack: false,
  afterCompactionRequest: false,
};

/**
 * The newest provider request of `lines` (a whole rollout), rebuilt as the cache report compares
 * it, with what the lines after it did to history; null when the rollout records none. The
 * thread's memory of its previous request is rebuilt from it where the memory is missing (an
 * import, a fork, a restore).
 */
export function newestRequest(
  lines: readonly SeqLine[],
  opts: ReplayOptions,
): RememberedRequest | null {
  const at = requestLines(lines).at(-1);
  if (at === undefined) return null;
  const parts = requestTexts(at.instructions, at.tools, inputOf(lines, at, opts));
  const since = historyEdits(lines, at.index, lines.length);
  return {
    head: {
      seq: at.seq,
      model: at.model,
      kind: at.kind,
      at_ms: Date.parse(at.timestamp),
      parts: parts.length,
      compacted: since.compacted,
      rolled_back: since.rolledBack,
    },
    parts,
  };
}
