export {
  estimateItemBytes,
  estimateItemsTokenCount,
  estimateItemTokenCount,
  estimateSentItemTokenCount,
  estimateTextTokenCount,
  freezeItemsInPlace,
  frozenItem,
  isModelGeneratedItem,
} from "./estimate.ts";
export { ContextManager } from "./history.ts";
export { SYNTHETIC_OUTPUT_NAMESPACE } from "./normalize.ts";
export { PromptInput } from "./prompt-input.ts";
export {
  type RunSummary,
  SealedItems,
  type StoredItems,
  segmentsLength,
  summarizeRun,
} from "./sealed.ts";
export {
  approxTokensFromByteCount,
  truncateText,
  truncateToolOutput,
  utf8ByteLength,
} from "./truncate.ts";
export type { ContextManagerState, InputModality, TruncationPolicy } from "./types.ts";
