export * from "./codex-settings.ts";
export * from "./compaction.ts";
export * from "./configuration.ts";
export { assertContextFits } from "./context-fit.ts";
export {
  buildInitialContext,
  buildSettingsUpdateItems,
  type ContextUpdateResult,
  previousTurnSettingsOf,
  recordContextUpdates,
  recordWorldStateUpdate,
  type WorldStateUpdateResult,
  withTurnId,
} from "./context-updates.ts";
export * from "./engine.ts";
export * from "./errors.ts";
export * from "./idle-compaction.ts";
export { importedBaseline } from "./imported-baseline.ts";
export * from "./imported-config.ts";
export * from "./notices.ts";
export { buildCompactionPrompt, buildPrompt, modelVisiblePrompt } from "./prompt.ts";
export type { PlannedWork } from "./reservation.ts";
export * from "./rollout-sink.ts";
export * from "./turn-context.ts";
