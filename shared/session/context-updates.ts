import { type Fragment, type FragmentRole, MARKERS, renderFragment } from "../context/index.ts";
import type { ContextManager } from "../context-manager/index.ts";
import type {
  MessageItem,
  PreviousTurnSettings,
  ResponseItem,
  TurnContextItem,
  WorldStateItem,
} from "../protocol/index.ts";
import { buildWorldState, mergePatchFrom, type WorldState } from "../world-state/index.ts";
import type { RolloutSink } from "./rollout-sink.ts";
import { type StepContext, type TurnContext, toTurnContextItem } from "./turn-context.ts";

/** Developer fragments that precede `developer_instructions` in the initial bundle (reference §5.3). */
const LEADING_DEVELOPER_MARKERS: readonly string[] = [
  MARKERS.modelSwitch.start,
  MARKERS.permissions.start,
];

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

/**
 * The full initial context of a turn (reference §5.3): one merged developer message (model switch
 * first, then permissions, then `developer_instructions`, then the other developer sections), then
 * one merged contextual user message (AGENTS.md, environment, custom user sections). Empty groups
 * produce no message. Every item carries the turn id.
 */
export function buildInitialContext(turn: TurnContext, worldState: WorldState): MessageItem[] {
  const fragments = worldState.renderFull();
  const developer = fragments.filter((f) => f.role === "developer");
  const leading = developer.filter((f) => LEADING_DEVELOPER_MARKERS.includes(f.startMarker));
  const trailing = developer.filter((f) => !LEADING_DEVELOPER_MARKERS.includes(f.startMarker));
  const developerTexts = [
    ...leading.map(renderFragment),
    ...(turn.config.developer_instructions ? [turn.config.developer_instructions] : []),
    ...trailing.map(renderFragment),
  ];
  const userTexts = fragments.filter((f) => f.role === "user").map(renderFragment);
  const items: MessageItem[] = [];
  if (developerTexts.length > 0) items.push(message("developer", developerTexts));
  if (userTexts.length > 0) items.push(message("user", userTexts));
  return items.map((item) => withTurnId(item, turn.turnId));
}

/**
 * A settings update (reference §5.2): at most two messages, one developer message with the
 * developer-role diffs (model switch first), then one contextual user message.
 */
export function buildSettingsUpdateItems(
  turn: TurnContext,
  fragments: readonly Fragment[],
): MessageItem[] {
  const items: MessageItem[] = [];
  for (const role of ["developer", "user"] as const) {
    const texts = fragments.filter((f) => f.role === role).map(renderFragment);
    if (texts.length > 0) items.push(message(role, texts));
  }
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
 * are rendered, with a merge-patch `world_state` (none when nothing changed). Durable order: the
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
  const snapshot = worldState.snapshot();
  const full = history.referenceContextItem === undefined;
  const baseline = history.worldStateBaseline;

  let items: MessageItem[];
  let worldStateItem: WorldStateItem | undefined;
  if (full) {
    items = buildInitialContext(turn, worldState);
    worldStateItem = { full: true, state: snapshot };
  } else {
    items = buildSettingsUpdateItems(turn, worldState.renderHistoryDiff(baseline, history.items));
    if (baseline === undefined) {
      worldStateItem = { full: true, state: snapshot };
    } else {
      const patch = mergePatchFrom(baseline, snapshot);
      worldStateItem = patch === undefined ? undefined : { full: false, state: patch };
    }
  }

  const turnContextItem = toTurnContextItem(turn);
  if (items.length > 0) {
    history.recordItems(items, turn.truncationPolicy);
    for (const item of items) sink.append({ type: "response_item", payload: item });
  }
  sink.append({ type: "turn_context", payload: turnContextItem });
  if (worldStateItem !== undefined) sink.append({ type: "world_state", payload: worldStateItem });
  history.referenceContextItem = turnContextItem;
  history.worldStateBaseline = snapshot;
  return { full, items, turnContextItem, worldStateItem };
}

/** The settings a turn leaves for the next one (reference §1.5 `PreviousTurnSettings`). */
export function previousTurnSettingsOf(turn: TurnContext): PreviousTurnSettings {
  return { model: turn.model.slug };
}
