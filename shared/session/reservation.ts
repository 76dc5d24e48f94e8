import { estimateItemsTokenCount, estimateTextTokenCount } from "../context-manager/index.ts";
import type { ModelInfo } from "../models/index.ts";
import type {
  ContentItem,
  ResponseItem,
  SessionConfiguration,
  ThreadConfig,
} from "../protocol/index.ts";
import {
  autoCompactionModel,
  compactionFamilyChanged,
  contextTokens,
  exceedsAutoCompactLimitOf,
  summarizerFor,
} from "./compaction-task.ts";
import { resolveSessionConfiguration } from "./configuration.ts";
import { smallestPrompt } from "./context-fit.ts";
import { summarizationRequestMessage } from "./notices.ts";
import { deniedOutput } from "./server-calls.ts";
import type { EngineDeps, PendingCallAnswer, SessionState } from "./task-scope.ts";

/** Work about to reach the model: a task about to start, or input joining the running turn. */
export type PlannedWork =
  | {
      kind: "turn";
      content: readonly ContentItem[];
      replayed?: readonly ResponseItem[];
      overrides?: ThreadConfig;
    }
  | {
      kind: "resume";
      outputs: readonly PendingCallAnswer[];
      queued?: readonly (readonly ContentItem[])[];
    }
  | { kind: "compaction" }
  /** The next round of a running turn, after its server tool calls (their outputs recorded). */
  | { kind: "round" }
  /** Steered input: one more sampling step of the running turn. */
  | { kind: "steer"; content: readonly ContentItem[] };

/** What one model request over a prompt of `promptTokens` may use: the prompt and the most output. */
function requestReservation(promptTokens: number, model: ModelInfo): number {
  return promptTokens + model.maxOutputTokens;
}

/**
 * What `work` may use, input and output tokens, for `tokens_per_day` (design §11): an upper
 * estimate of every model request it makes, each its prompt plus the model's `maxOutputTokens`
 * (which the provider is held to). The prompt is the context as auto-compaction measures it
 * (`contextTokens`), plus what the work records before it samples: at most the full initial
 * context (a diff is never larger), its input (a turn's message, a resume's outputs and queued
 * input, a steer's message and the output of the step running now), and the tools. When that
 * context would pass the auto-compaction limit, a compaction request (the context and the
 * summarization request) comes first; the sampling request after it is no larger than before.
 * The estimate is the context manager's (`ceil(bytes / 4)`), as every budget here.
 */
export function reservation(state: SessionState, deps: EngineDeps, work: PlannedWork): number {
  const config = work.kind === "turn" ? configWith(state, deps, work.overrides) : state.config;
  const model = deps.catalog.get(config.model);
  if (model === undefined) throw new Error(`model ${config.model} left the catalog`);
  const context = contextTokens(state, model);
  const summarize = (by: ModelInfo) =>
    requestReservation(context + estimateItemsTokenCount([summarizationRequestMessage()]), by);
  if (work.kind === "compaction") return summarize(model);
  const input = work.kind === "turn" || work.kind === "steer" ? work.content : [];
  const previous = state.previousTurnSettings?.model;
  const replayed = work.kind === "turn" ? (work.replayed ?? []) : [];
  const smallest = smallestPrompt(config, model, deps.clock.nowMs(), previous, input, replayed);
  const added =
    smallest.items +
    (work.kind === "resume" ? resumeTokens(work.outputs, work.queued ?? []) : 0) +
    (work.kind === "steer" ? model.maxOutputTokens : 0);
  const tools = estimateTextTokenCount(JSON.stringify(smallest.tools));
  const sampling = requestReservation(context + added + tools, model);
  if (work.kind === "turn" && compactionFamilyChanged(state, model)) {
    const summarizer = autoCompactionModel(state, model, deps.catalog) ?? model;
    return summarize(summarizer) + sampling;
  }
  if (!exceedsAutoCompactLimitOf(state, model, context + added)) return sampling;
  return summarize(summarizerFor(state, model, deps.catalog)) + sampling;
}

/**
 * The configuration a turn with `overrides` runs under. Overrides that do not resolve leave the
 * current one: such a turn is refused when it starts, before any request.
 */
function configWith(
  state: SessionState,
  deps: EngineDeps,
  overrides: ThreadConfig | undefined,
): SessionConfiguration {
  if (overrides === undefined) return state.config;
  try {
    return resolveSessionConfiguration(state.config, overrides, deps.catalog, deps.defaultModel);
  } catch {
    return state.config;
  }
}

/** The items a resume records before it samples: the outputs, then the queued input. */
function resumeTokens(
  outputs: readonly PendingCallAnswer[],
  queued: readonly (readonly ContentItem[])[],
): number {
  const items: ResponseItem[] = [
    ...outputs.map(
      (o): ResponseItem => ({
        type: "function_call_output",
        call_id: o.call_id,
        // An approval's output is the call's: known only once it ran (the truncation bounds it).
        output: "output" in o ? o.output : o.approve ? "" : deniedOutput(o.request, o.reason),
      }),
    ),
    ...queued.map(
      (content): ResponseItem => ({ type: "message", role: "user", content: [...content] }),
    ),
  ];
  return estimateItemsTokenCount(items);
}
