import { type Fragment, type FragmentRole, MARKERS, renderFragment } from "../context/index.ts";
import { type ContextManager, frozenItem } from "../context-manager/index.ts";
import type {
  MessageItem,
  PreviousTurnSettings,
  ResponseItem,
  TurnContextItem,
  WorldStateItem,
  WorldStateSnapshot,
} from "../protocol/index.ts";
import { buildWorldState, mergePatchFrom, type WorldState } from "../world-state/index.ts";
import type { RolloutSink } from "./rollout-sink.ts";
import { type StepContext, type TurnContext, toTurnContextItem } from "./turn-context.ts";

/** Developer fragments that precede `developer_instructions` in the initial bundle (reference §5.3). */
const LEADING_DEVELOPER_MARKERS: readonly string[] = [MARKERS.permissions.start];

/**
 * Stamps `turn_id` into an item's metadata unless a non-empty one is there (reference §1.2).
 * Returns a new item; the input is not changed.
 */
export function withTurnId<T extends ResponseItem>(item: T, turnId: string): T {
  if (turnId === "" || item.type === "other") return item;
  const meta = item.internal_chat_message_metadata_passthrough;
  if (meta?.turn_id) return item;
  return { ...item, internal_chat_message_metadata_passthrough: { ...meta, turn_id: turnId } };
}

function message(role: FragmentRole, texts: readonly string[]): MessageItem {
  return {
    type: "message",
    role,
    content: texts.map((text) => ({ type: "input_text" as const, text })),
  };
}

/** Standalone fragments placed `where`, each as a message of its own, in section order. */
function standaloneMessages(
  fragments: readonly Fragment[],
  where: "before" | "after",
): MessageItem[] {
  return fragments
    .filter((f) => f.standalone === where)
    .map((f) => message(f.role, [renderFragment(f)]));
}

/**
 * The full initial context of a turn (reference §5.3): the leading standalone fragments first,
 * each its own message (the model switch, as Codex places it), then one merged developer message
 * (permissions, then `developer_instructions`, then the other developer sections), then one
 * merged contextual user message (AGENTS.md, environment, custom user sections), then the
 * trailing standalone ones (the turn's additional context). Empty groups produce no message.
 * Every item carries the turn id.
 */
export function buildInitialContext(turn: TurnContext, worldState: WorldState): MessageItem[] {
  const all = worldState.renderFull();
  const fragments = all.filter((f) => !f.standalone);
  const developer = fragments.filter((f) => f.role === "developer");
  const leading = developer.filter((f) => LEADING_DEVELOPER_MARKERS.includes(f.startMarker));
  const trailing = developer.filter((f) => !LEADING_DEVELOPER_MARKERS.includes(f.startMarker));
  const developerTexts = [
    ...leading.map(renderFragment),
    ...(turn.config.developer_instructions ? [turn.config.developer_instructions] : []),
    ...trailing.map(renderFragment),
  ];
  const userTexts = fragments.filter((f) => f.role === "user").map(renderFragment);
  const items = standaloneMessages(all, "before");
  if (developerTexts.length > 0) items.push(message("developer", developerTexts));
  if (userTexts.length > 0) items.push(message("user", userTexts));
  items.push(...standaloneMessages(all, "after"));
  return items.map((item) => withTurnId(item, turn.turnId));
}

/**
 * A settings update (reference §5.2): the leading standalone fragments first, each its own
 * message (the model switch, so the new model reads its guidance before the other diffs), then
 * one developer message with the other developer-role diffs, then one contextual user message,
 * then the trailing standalone ones (additional context), each its own message.
 */
export function buildSettingsUpdateItems(
  turn: TurnContext,
  fragments: readonly Fragment[],
): MessageItem[] {
  const items = standaloneMessages(fragments, "before");
  for (const role of ["developer", "user"] as const) {
    const texts = fragments.filter((f) => f.role === role && !f.standalone).map(renderFragment);
    if (texts.length > 0) items.push(message(role, texts));
  }
  items.push(...standaloneMessages(fragments, "after"));
  return items.map((item) => withTurnId(item, turn.turnId));
}

export interface ContextUpdateResult {
  /** Whether the full initial context was injected (no reference context item). */
  readonly full: boolean;
  /** The model-visible items appended to history. */
  readonly items: readonly MessageItem[];
  readonly turnContextItem: TurnContextItem;
  readonly worldStateItem: WorldStateItem | undefined;
}

/**
 * `record_context_updates_and_set_reference_context_item` (reference §5.2), design §10
 * invariants 1-2. With no reference context item the full initial context is recorded with a full
 * `world_state`; otherwise only the sections that changed (or whose text is missing from history)
 * are rendered, with a merge-patch `world_state` (none when nothing changed). Sections of the
 * baseline that Spindle does not model (Codex's own, from an imported rollout) are carried into
 * the new snapshot as they are, so no patch removes them. Durable order: the
 * context `response_item`s, then `turn_context` (always), then `world_state` — the patch is written
 * after the context it describes is in history. The reference and the baseline always advance.
 */
export function recordContextUpdates(
  history: ContextManager,
  turn: TurnContext,
  step: StepContext,
  sink: RolloutSink,
): ContextUpdateResult {
  const worldState = buildWorldState(step.worldState);
  const snapshot = worldState.snapshotOver(history.worldStateBaseline);
  const full = history.referenceContextItem === undefined;

  const { items, worldStateItem } = full
    ? {
        items: buildInitialContext(turn, worldState),
        worldStateItem: { full: true, state: snapshot } satisfies WorldStateItem,
      }
    : diffAgainstBaseline(history, turn, worldState, snapshot);

  // The line names the MCP tools the turn's first step offered; the reference item is the line
  // as written, so a reload from it is what memory held.
  const mcpTools = step.serverTools.map((t) => ({
    name: t.spec.name,
    server: t.label,
    tool: t.tool,
  }));
  const settings = toTurnContextItem(turn);
  const turnContextItem = mcpTools.length > 0 ? { ...settings, mcp_tools: mcpTools } : settings;
  const recorded = recordContextItems(history, items, turn, sink);
  sink.append({ type: "turn_context", payload: turnContextItem });
  if (worldStateItem !== undefined) sink.append({ type: "world_state", payload: worldStateItem });
  history.referenceContextItem = turnContextItem;
  history.worldStateBaseline = snapshot;
  return { full, items: recorded, turnContextItem, worldStateItem };
}

/**
 * Records context items in history and as `response_item` lines. Each is frozen first, so history
 * and its line share one object (a checkpoint extended from the lines shares it too).
 */
function recordContextItems(
  history: ContextManager,
  items: readonly MessageItem[],
  turn: TurnContext,
  sink: RolloutSink,
): MessageItem[] {
  const frozen = items.map((item) => frozenItem(item));
  history.recordItems(frozen, turn.truncationPolicy);
  for (const item of frozen) sink.append({ type: "response_item", payload: item });
  return frozen;
}

/**
 * The diff of the world state against history's baseline: the fragments of the sections that
 * changed (or whose text is missing from history) as at most two messages, and the `world_state`
 * item describing it (full without a baseline, a merge patch otherwise, none when unchanged).
 */
function diffAgainstBaseline(
  history: ContextManager,
  turn: TurnContext,
  worldState: WorldState,
  snapshot: WorldStateSnapshot,
): { items: MessageItem[]; worldStateItem: WorldStateItem | undefined } {
  const baseline = history.worldStateBaseline;
  const items = buildSettingsUpdateItems(turn, worldState.renderHistoryDiff(baseline, history));
  if (baseline === undefined) return { items, worldStateItem: { full: true, state: snapshot } };
  const patch = mergePatchFrom(baseline, snapshot);
  return { items, worldStateItem: patch === undefined ? undefined : { full: false, state: patch } };
}

export interface WorldStateUpdateResult {
  /** The model-visible diff items appended to history (none when nothing changed). */
  readonly items: readonly MessageItem[];
  readonly worldStateItem: WorldStateItem | undefined;
}

/**
 * The world-state half of `recordContextUpdates`, for a later sampling step of a running turn
 * (design §5 step 5: a resumed or continued turn captures a new StepContext, e.g. the date rolled
 * over). Records exactly the diff the turn-start path would record — only the changed sections'
 * items (design §10 invariant 2), then their `world_state` patch — and advances the baseline. It writes no `turn_context` and
 * leaves the reference context item alone: the turn's settings are frozen (design §3), so the
 * turn's `turn_context` line stays true; only world facts outside the settings (the clock) move.
 */
export function recordWorldStateUpdate(
  history: ContextManager,
  turn: TurnContext,
  step: StepContext,
  sink: RolloutSink,
): WorldStateUpdateResult {
  const worldState = buildWorldState(step.worldState);
  const snapshot = worldState.snapshotOver(history.worldStateBaseline);
  const { items, worldStateItem } = diffAgainstBaseline(history, turn, worldState, snapshot);
  const recorded = recordContextItems(history, items, turn, sink);
  if (worldStateItem !== undefined) sink.append({ type: "world_state", payload: worldStateItem });
  history.worldStateBaseline = snapshot;
  return { items: recorded, worldStateItem };
}

/** The settings a turn leaves for the next one (reference §1.5 `PreviousTurnSettings`). */
export function previousTurnSettingsOf(turn: TurnContext): PreviousTurnSettings {
  const { slug, compHash } = turn.model;
  return compHash === undefined ? { model: slug } : { model: slug, comp_hash: compHash };
}
