import { effectiveContextWindow } from "../models/index.ts";
import type { ContentItem, RolloutItem } from "../protocol/index.ts";
import type { CompactionTrigger } from "./compaction.ts";
import type { TurnContext } from "./turn-context.ts";

/** A task's lifecycle lines (reference §1.7), as the engine writes them to the rollout. */

/**
 * `event_msg task_started` at the start of a turn or a compaction. A compaction's `trigger` is
 * Spindle's own field (`spindle_compaction_trigger`): Codex records none, and its readers ignore
 * fields they do not know, so the line stays a valid Codex `task_started`.
 */
export function taskStartedLine(
  turn: TurnContext,
  startedAtMs: number,
  trigger?: CompactionTrigger,
): RolloutItem {
  return {
    type: "event_msg",
    payload: {
      type: "task_started",
      turn_id: turn.turnId,
      started_at: Math.floor(startedAtMs / 1000),
      model_context_window: effectiveContextWindow(turn.model),
      collaboration_mode_kind: turn.config.collaboration_mode?.mode ?? "default",
      ...(trigger === undefined ? {} : { spindle_compaction_trigger: trigger }),
    },
  };
}

/** `event_msg task_complete`; `duration_ms` only when the task's start is known here. */
export function taskCompleteLine(
  turnId: string,
  lastMessage: string | undefined,
  completedAtMs: number,
  startedAtMs?: number,
): RolloutItem {
  return {
    type: "event_msg",
    payload: {
      type: "task_complete",
      turn_id: turnId,
      last_agent_message: lastMessage ?? null,
      ...endedAt(completedAtMs, startedAtMs),
    },
  };
}

/** `event_msg turn_aborted`: interrupted by the caller, or `replaced` by a new turn. */
export function turnAbortedLine(
  turnId: string,
  reason: "replaced" | "interrupted",
  completedAtMs: number,
  startedAtMs?: number,
): RolloutItem {
  return {
    type: "event_msg",
    payload: {
      type: "turn_aborted",
      turn_id: turnId,
      reason,
      ...endedAt(completedAtMs, startedAtMs),
    },
  };
}

/** When a task ended (seconds), and how long it took when its start is known. */
function endedAt(completedAtMs: number, startedAtMs: number | undefined) {
  return {
    completed_at: Math.floor(completedAtMs / 1000),
    ...(startedAtMs === undefined ? {} : { duration_ms: completedAtMs - startedAtMs }),
  };
}

/** `event_msg user_message` after a user input item: its text and image URLs. */
export function userMessageLine(content: readonly ContentItem[]): RolloutItem {
  return {
    type: "event_msg",
    payload: {
      type: "user_message",
      message: content.map((p) => (p.type === "input_text" ? p.text : "")).join(""),
      images: content.flatMap((p) => (p.type === "input_image" ? [p.image_url] : [])),
      local_images: [],
      text_elements: [],
    },
  };
}
