export * from "./configuration.ts";
export {
  buildInitialContext,
  buildSettingsUpdateItems,
  type ContextUpdateResult,
  previousTurnSettingsOf,
  recordContextUpdates,
  withTurnId,
} from "./context-updates.ts";
export * from "./engine.ts";
export { buildPrompt } from "./prompt.ts";
export * from "./rollout-sink.ts";
export * from "./turn-context.ts";
