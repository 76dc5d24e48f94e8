import type {
  ResponseItem,
  TokenUsageInfo,
  TurnContextItem,
  WorldStateSnapshot,
} from "../protocol/index.ts";
import type { SealedItems } from "./sealed.ts";

/**
 * How much of a tool output history keeps (reference §4.2). `tokens` budgets are converted to
 * bytes at 4 bytes per token; `bytes` budgets are UTF-8 bytes.
 */
export type TruncationPolicy = { mode: "tokens" | "bytes"; limit: number };

/** What the model accepts as input. Without `"image"`, prompts carry a text placeholder instead. */
export type InputModality = "text" | "image";

/**
 * The whole ContextManager, used for checkpoints (design §6). Optional fields are
 * omitted when absent, and absence has a meaning of its own.
 */
export interface ContextManagerState {
  /**
   * Runs of history items not read yet (a restored checkpoint's item groups), before `items`.
   * In memory only, never JSON: a state meant for storage holds plain items (`readSealed()`).
   */
  sealed?: readonly SealedItems[];
  /** History, oldest first (after `sealed`). */
  items: ResponseItem[];
  /** Bumped whenever history is rewritten (replace, rollback, image replacement), not on append. */
  historyVersion: number;
  /** Undefined: no usage has been reported yet. */
  tokenInfo?: TokenUsageInfo;
  /** Undefined: there is no baseline to diff against, so the next turn injects full context. */
  referenceContextItem?: TurnContextItem;
  /** Undefined: the next `world_state` line is a full snapshot rather than a merge patch. */
  worldStateBaseline?: WorldStateSnapshot;
}
