import {
  hasNonContextualDevMessageContent,
  isContextualDevMessageContent,
  isContextualUserMessageContent,
  isUserTurnBoundary,
  type RetainedTextMatcher,
  someRetainedText,
} from "../context/index.ts";
import {
  appendTokenUsage,
  type KnownResponseItem,
  type ResponseItem,
  type TokenUsage,
  type TokenUsageInfo,
  type TurnContextItem,
  type WorldStateSnapshot,
} from "../protocol/index.ts";
import {
  estimateItemsTokenCount,
  estimateTextTokenCount,
  frozenHistoryCopy,
  frozenItem,
  isFrozenHistory,
  isModelGeneratedItem,
  tokensAfterLastModelGeneratedItem,
  tokensOfReasoningBeforeLastUserTurn,
} from "./estimate.ts";
import { frozenCopy } from "./immutable.ts";
import { counterpartIndex, normalizeForPrompt } from "./normalize.ts";
import type { PromptInput } from "./prompt-input.ts";
import { type SealedItems, segmentsLength, sliceSegments } from "./sealed.ts";
import { historyOutputPolicy, truncateToolOutput } from "./truncate.ts";
import type { ContextManagerState, InputModality, TruncationPolicy } from "./types.ts";

/**
 * Items the model API accepts (reference §4.1): any message but a system one, and every known
 * tool/reasoning item. `other` (an item type this build does not know) never is.
 */
function isApiItem(item: ResponseItem): item is KnownResponseItem {
  if (item.type === "other") return false;
  if (item.type === "message") return item.role !== "system";
  return true;
}

const NO_RUNS: readonly SealedItems[] = Object.freeze([]);

function optionalFrozen<T>(value: T | undefined): T | undefined {
  return value === undefined ? undefined : frozenCopy(value);
}

/**
 * A thread's model context (Codex `ContextManager`, reference §4): append-only history plus the
 * token usage, the reference turn context and the world-state baseline that the next turn diffs
 * against. Pure: no I/O, no clock.
 *
 * Everything it stores is a frozen copy (`frozenItem` for items, which also keeps their byte
 * counts for estimates; `frozenCopy` otherwise); values read from it must be copied
 * before being changed. `clone()` is O(1): clones share one items array until either writes,
 * and the writer copies it first.
 *
 * A history restored from a checkpoint may begin with runs of items still as stored
 * (`SealedItems`). What a turn asks (appends, `promptInput`, estimates, the world-state diff's
 * search) is answered from the runs' summaries, reading only a run whose prompt form differs from
 * what is stored; the first read of `items` (a rewrite, an HTTP provider's request) reads them all.
 */
export class ContextManager {
  /** Runs of history items not read yet, oldest first; they come before `#items`. */
  #sealed: readonly SealedItems[] = NO_RUNS;
  #items: ResponseItem[];
  /** True while another manager may hold the same array: the next write must copy it. */
  #itemsShared = false;
  #historyVersion: number;
  #tokenInfo: TokenUsageInfo | undefined;
  #referenceContextItem: TurnContextItem | undefined;
  #worldStateBaseline: WorldStateSnapshot | undefined;

  /**
   * Restores a manager from a checkpoint (or starts empty). The state is copied, not kept, except
   * an items array `freezeItemsInPlace` made (a checkpoint just read): that one is shared until
   * the first write, like a clone's, so a restored history is not copied item by item.
   */
  constructor(state: Partial<ContextManagerState> = {}) {
    if (state.sealed !== undefined && state.sealed.length > 0) {
      this.#sealed = Object.freeze([...state.sealed]);
    }
    const items = state.items ?? [];
    if (isFrozenHistory(items)) {
      this.#items = items as ResponseItem[];
      this.#itemsShared = true;
    } else {
      this.#items = items.map((item) => frozenItem(item));
    }
    this.#historyVersion = state.historyVersion ?? 0;
    this.#tokenInfo = optionalFrozen(state.tokenInfo);
    this.#referenceContextItem = optionalFrozen(state.referenceContextItem);
    this.#worldStateBaseline = optionalFrozen(state.worldStateBaseline);
  }

  /**
   * History, oldest first. A live read-only view: later writes to this manager show through it
   * (copy it to keep a snapshot). Item objects are frozen.
   */
  get items(): readonly ResponseItem[] {
    this.readSealed();
    return this.#items;
  }

  /** How many items history holds, read or not. */
  get length(): number {
    return segmentsLength(this.#sealed) + this.#items.length;
  }

  /** Items `[start, end)` of history (indexes ≥ 0), reading only the runs they fall in. */
  slice(start: number, end: number): ResponseItem[] {
    return sliceSegments<ResponseItem>([...this.#sealed, this.#items], start, end);
  }

  /** Reads the stored runs now, so that `toState()` holds plain items only. */
  readSealed(): void {
    if (this.#sealed.length === 0) return;
    const all = new Array<ResponseItem>(this.length);
    let n = 0;
    for (const run of this.#sealed) for (const item of run.items) all[n++] = item;
    for (const item of this.#items) all[n++] = item;
    this.#items = all;
    this.#itemsShared = false;
    this.#sealed = NO_RUNS;
  }

  /** Bumped whenever history is rewritten rather than appended to. */
  get historyVersion(): number {
    return this.#historyVersion;
  }

  /** Undefined: no usage has been reported yet. */
  get tokenInfo(): TokenUsageInfo | undefined {
    return this.#tokenInfo;
  }
  set tokenInfo(value: TokenUsageInfo | undefined) {
    this.#tokenInfo = optionalFrozen(value);
  }

  /** Undefined: there is no baseline, so the next turn injects full context. */
  get referenceContextItem(): TurnContextItem | undefined {
    return this.#referenceContextItem;
  }
  set referenceContextItem(value: TurnContextItem | undefined) {
    this.#referenceContextItem = optionalFrozen(value);
  }

  /** Undefined: the next `world_state` line is a full snapshot, not a merge patch. */
  get worldStateBaseline(): WorldStateSnapshot | undefined {
    return this.#worldStateBaseline;
  }
  set worldStateBaseline(value: WorldStateSnapshot | undefined) {
    this.#worldStateBaseline = optionalFrozen(value);
  }

  /** An O(1) copy. Both managers share the items array until one of them writes. */
  clone(): ContextManager {
    const copy = new ContextManager();
    copy.#sealed = this.#sealed;
    copy.#items = this.#items;
    copy.#itemsShared = true;
    this.#itemsShared = true;
    copy.#historyVersion = this.#historyVersion;
    // The remaining fields are frozen, so sharing them is safe.
    copy.#tokenInfo = this.#tokenInfo;
    copy.#referenceContextItem = this.#referenceContextItem;
    copy.#worldStateBaseline = this.#worldStateBaseline;
    return copy;
  }

  /**
   * The state for a checkpoint; undefined fields are omitted. Values are frozen, the items array
   * too: a manager built from it shares that array instead of re-checking items. Runs not read
   * yet stay as they are (`sealed`); call `readSealed()` first for plain JSON.
   */
  toState(): ContextManagerState {
    const state: ContextManagerState = {
      items: frozenHistoryCopy(this.#items),
      historyVersion: this.#historyVersion,
    };
    if (this.#sealed.length > 0) state.sealed = this.#sealed;
    if (this.#tokenInfo !== undefined) state.tokenInfo = this.#tokenInfo;
    if (this.#referenceContextItem !== undefined) {
      state.referenceContextItem = this.#referenceContextItem;
    }
    if (this.#worldStateBaseline !== undefined) state.worldStateBaseline = this.#worldStateBaseline;
    return state;
  }

  /** The items array, copied first if another manager shares it. */
  #writableItems(): ResponseItem[] {
    if (this.#itemsShared) {
      this.#items = this.#items.slice();
      this.#itemsShared = false;
    }
    return this.#items;
  }

  /**
   * Appends the API items of `items` (reference §4.1), dropping system messages and `other`.
   * Tool outputs are truncated to `policy × 1.2`. Stores copies: the caller's objects are never
   * changed, and the copies are returned. Does not bump `historyVersion`. Amortized O(items
   * added) unless the array is shared; runs not read yet stay unread.
   */
  recordItems(items: readonly ResponseItem[], policy: TruncationPolicy): ResponseItem[] {
    const outputPolicy = historyOutputPolicy(policy);
    const recorded: ResponseItem[] = [];
    let target: ResponseItem[] | undefined;
    for (const item of items) {
      if (!isApiItem(item)) continue;
      let stored = item;
      if (item.type === "function_call_output" || item.type === "custom_tool_call_output") {
        const output = truncateToolOutput(item.output, outputPolicy);
        // An output within the policy is kept as it is (shared when frozen already).
        if (output !== item.output) stored = { ...item, output };
      }
      target ??= this.#writableItems();
      const frozen = frozenItem(stored);
      target.push(frozen);
      recorded.push(frozen);
    }
    return recorded;
  }

  /**
   * The prompt view of history (reference §4.3): synthetic `aborted` outputs for calls without
   * one, orphan outputs dropped, images replaced when `modalities` lacks `"image"`.
   *
   * Works on a copy and never changes history or its item objects; the synthetic outputs are
   * deterministic (design §10 invariant 4). Returned items may be shared with history (frozen).
   */
  forPrompt(modalities: readonly InputModality[]): KnownResponseItem[] {
    return this.promptInput(modalities).toArray();
  }

  /**
   * `forPrompt` as a model request's input: stored runs that normalization leaves unchanged stay
   * unread (see `PromptInput`).
   */
  promptInput(modalities: readonly InputModality[]): PromptInput {
    return normalizeForPrompt(this.#sealed, this.#items, modalities);
  }

  /**
   * True when some user or developer `input_text` part satisfies `accepts` (the world-state
   * diff's search, `RetainedHistory`). Stored runs answer from their summaries' contextual
   * fragments, which hold every text a world-state section looks for.
   */
  someRetainedText(accepts: RetainedTextMatcher): boolean {
    for (const run of this.#sealed) {
      if (run.summary === undefined) {
        if (someRetainedText(run.items, accepts)) return true;
        continue;
      }
      for (const fragment of run.summary.fragments) {
        if (accepts(fragment.role, fragment.text)) return true;
      }
    }
    return someRetainedText(this.#items, accepts);
  }

  /** Replaces history (compaction, rollback): `historyVersion + 1`, world-state baseline cleared. */
  replace(items: readonly ResponseItem[]): void {
    this.#replaceWith(items.map((item) => frozenItem(item)));
  }

  /** `replace` for arrays this manager built from its own (already frozen) items. */
  #replaceWith(items: ResponseItem[]): void {
    this.#sealed = NO_RUNS;
    this.#items = items;
    this.#itemsShared = false;
    this.#historyVersion += 1;
    this.#worldStateBaseline = undefined;
  }

  /**
   * Removes the oldest item and its call/output counterpart, if any (reference §4.4). Clears the
   * world-state baseline: the removed items may have carried retained fragments.
   */
  removeFirstItem(): void {
    this.readSealed();
    if (this.#items.length === 0) return;
    const items = this.#writableItems();
    const removed = items.shift();
    if (removed !== undefined) this.#removeCounterpart(items, removed);
  }

  /** Removes the newest item and its call/output counterpart, like `removeFirstItem`. */
  removeLastItem(): void {
    this.readSealed();
    if (this.#items.length === 0) return;
    const items = this.#writableItems();
    const removed = items.pop();
    if (removed !== undefined) this.#removeCounterpart(items, removed);
  }

  #removeCounterpart(items: ResponseItem[], removed: ResponseItem): void {
    const index = counterpartIndex(items, removed);
    if (index >= 0) items.splice(index, 1);
    this.#worldStateBaseline = undefined;
  }

  /**
   * Rolls back the last `n` user turns (reference §4.5):
   * - `n < 1` does nothing (no version bump); a fractional `n` counts whole turns;
   * - with no user-turn boundary, history is replaced by itself (version bump, baseline cleared);
   * - otherwise history is cut at the n-th boundary from the end (at the first boundary when
   *   `n` covers them all, so the session prefix before it survives), then contextual developer
   *   and user messages right above the cut are trimmed too. Trimming a developer message that
   *   also holds non-contextual text (a mixed initial-context bundle) clears the reference
   *   context item, so the next turn reinjects full context.
   */
  dropLastNUserTurns(n: number): void {
    if (!(n >= 1)) return;
    const turns = Math.floor(n);
    const items = this.items;
    const boundaries: number[] = [];
    items.forEach((item, index) => {
      if (isUserTurnBoundary(item)) boundaries.push(index);
    });
    const first = boundaries[0];
    if (first === undefined) {
      this.#replaceWith(items.slice());
      return;
    }
    let cut = turns < boundaries.length ? (boundaries[boundaries.length - turns] ?? first) : first;
    while (cut > first) {
      const above = items[cut - 1];
      if (above?.type !== "message") break;
      if (above.role === "developer" && isContextualDevMessageContent(above.content)) {
        if (hasNonContextualDevMessageContent(above.content)) {
          this.#referenceContextItem = undefined;
        }
      } else if (!(above.role === "user" && isContextualUserMessageContent(above.content))) {
        break;
      }
      cut -= 1;
    }
    this.#replaceWith(items.slice(0, cut));
  }

  /**
   * Replaces the images of the last tool output with `placeholder` text (reference §4.4), e.g.
   * after a provider rejected an image. Looks at the last item that is a `function_call_output`
   * or a user-turn boundary; user messages are never changed. Bumps `historyVersion` and returns
   * true only if something was replaced.
   */
  replaceLastTurnImages(placeholder: string): boolean {
    this.readSealed();
    const index = this.#items.findLastIndex(
      (item) => item.type === "function_call_output" || isUserTurnBoundary(item),
    );
    const item = this.#items[index];
    if (item?.type !== "function_call_output" || typeof item.output === "string") return false;
    if (!item.output.some((part) => part.type === "input_image")) return false;
    const output = item.output.map((part) =>
      part.type === "input_image" ? { type: "input_text" as const, text: placeholder } : part,
    );
    // A new object: the old one may be shared with clones and handed-out prompts.
    this.#writableItems()[index] = frozenItem({ ...item, output });
    this.#historyVersion += 1;
    return true;
  }

  /** Adds the usage of one model response (`TokenUsageInfo::new_or_append`, reference §1.7). */
  updateTokenInfo(usage: TokenUsage | undefined, modelContextWindow?: number): void {
    this.#tokenInfo = optionalFrozen(appendTokenUsage(this.#tokenInfo, usage, modelContextWindow));
  }

  /** Estimated tokens of the base instructions plus every item (reference §4.6). */
  estimateTokenCount(baseInstructions: string): number {
    let total = estimateTextTokenCount(baseInstructions) + estimateItemsTokenCount(this.#items);
    for (const run of this.#sealed) {
      total += run.summary?.tokens ?? estimateItemsTokenCount(run.items);
    }
    return total;
  }

  /**
   * Tokens the context holds now (reference §4.6): the last reported total, plus estimates of the
   * items added since the last model-generated item, plus — when the server does not count past
   * reasoning itself — the encrypted reasoning before the last user turn.
   */
  getTotalTokenUsage(serverReasoningIncluded: boolean): number {
    if (!this.#tailAnswersUsage(serverReasoningIncluded)) this.readSealed();
    const lastTotal = this.#tokenInfo?.last_token_usage.total_tokens ?? 0;
    const added = tokensAfterLastModelGeneratedItem(this.#items);
    if (serverReasoningIncluded) return lastTotal + added;
    let reasoning = tokensOfReasoningBeforeLastUserTurn(this.#items);
    for (const run of this.#sealed) reasoning += run.summary?.reasoningTokens ?? 0;
    return lastTotal + added + reasoning;
  }

  /**
   * True when the items after the stored runs hold the last model-generated item (and, unless
   * the server counts reasoning, the last user turn boundary), and every run has a summary: the
   * runs then count for `getTotalTokenUsage` only through their summaries' reasoning tokens.
   */
  #tailAnswersUsage(serverReasoningIncluded: boolean): boolean {
    if (this.#sealed.length === 0) return true;
    if (this.#sealed.some((run) => run.summary === undefined)) return false;
    if (!this.#items.some(isModelGeneratedItem)) return false;
    return serverReasoningIncluded || this.#items.some(isUserTurnBoundary);
  }
}
