import type { ModelCatalog } from "../models/index.ts";
import type { RolloutLine, SessionConfiguration, WorldStateSnapshot } from "../protocol/index.ts";
import { isPlainObject } from "../protocol/index.ts";
import type { ReconstructedState } from "../rollout/index.ts";
import { buildWorldState, jsonEqual, SECTION_IDS } from "../world-state/index.ts";
import { buildTurnContext, captureStepContext } from "./turn-context.ts";

/**
 * The world-state baseline an imported Codex rollout resumes from, in Spindle's terms, or
 * undefined when it needs none: the rollout is Spindle's own (it holds a `spindle_config` line,
 * so its world state is already Spindle's), Codex wrote no world state (its sections' text in
 * history reads as Unknown and renders again), or the baseline is already this one.
 *
 * Codex's world state says what the model was told, in Codex's words; the configuration the
 * import read from the same rollout says it in Spindle's settings. So the sections Spindle models
 * take the snapshot Spindle gives that configuration: what the model saw is what Spindle would
 * have told it, and the first turn renders only what changes after the import, as Codex resuming
 * the file renders only what changed. Two values stay Codex's: the model (the one the newest turn
 * ran on, so a model switch still leads when the thread runs on another one) and the date the
 * model was last told. The sections Spindle does not model (Codex's `skills`, `realtime`, …)
 * are kept as they are.
 */
export function importedBaseline(
  catalog: ModelCatalog,
  config: SessionConfiguration,
  upload: readonly RolloutLine[],
  state: Pick<ReconstructedState, "history" | "previousTurnSettings">,
): WorldStateSnapshot | undefined {
  const codex = state.history.worldStateBaseline;
  if (codex === undefined || upload.some((line) => line.type === "spindle_config")) {
    return undefined;
  }
  const model = catalog.get(config.model);
  if (model === undefined) return undefined;
  const turn = buildTurnContext("import", config, model, 0);
  const input = captureStepContext(turn, 0, undefined).worldState;
  const storedDate = isPlainObject(codex.environments)
    ? codex.environments.current_date
    : undefined;
  const spindle = buildWorldState({
    ...input,
    model: { ...input.model, slug: state.previousTurnSettings?.model ?? config.model },
    currentDate: typeof storedDate === "string" ? storedDate : "",
  }).snapshotOver(codex);
  const environments = spindle[SECTION_IDS.environments];
  // No date was told: the first turn tells it.
  if (typeof storedDate !== "string" && isPlainObject(environments)) {
    delete environments.current_date;
  }
  return jsonEqual(spindle, codex) ? undefined : spindle;
}
