export {
  type Checkpoint,
  type CheckpointOptions,
  createCheckpoint,
  DEFAULT_MAX_ROLLBACK_TURNS,
  extendCheckpoint,
  type NeedsFullReplay,
  reconstructFromCheckpoint,
  restoreCheckpoint,
} from "./checkpoint.ts";
export {
  type DecodeJsonlOptions,
  decodeRolloutJsonl,
  decodeRolloutLine,
  encodeRolloutJsonl,
  encodeRolloutLine,
  LEGACY_ROLLOUT_REASON,
  RolloutDecodeError,
} from "./codec.ts";
export {
  type ReconstructedState,
  type ReconstructOptions,
  reconstructRollout,
  worldStateOf,
} from "./reconstruct.ts";
export {
  type CompactedEntry,
  isHistoryRewrite,
  type OlderScanSummary,
  opensUntrackedTurn,
  type ScanEntry,
  type WorldStateRecord,
  type WorldStateReplay,
} from "./scan.ts";
export { unreadLineWarnings } from "./unread.ts";
