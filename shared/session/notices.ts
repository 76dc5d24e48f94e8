import { fragment, fragmentToMessage, MARKERS } from "../context/index.ts";
import type { MessageItem } from "../protocol/index.ts";

/**
 * Model-visible texts the engine writes on its own (our wording; reference §2.2 gives only their
 * meaning). They are persisted in rollouts and matched on replay: change them only with care.
 */

/** Body of the `<turn_aborted>` fragment recorded when the user interrupts a turn. */
export const TURN_ABORTED_GUIDANCE =
  "The user stopped the previous turn on purpose. Tool calls that were running at that moment may have finished only in part, and work they started may still be going on. Before you repeat or continue any of it, check what state it left behind and ask the user whether they want it redone.";

/**
 * The request appended (never recorded) to the compaction prompt. The local model recognizes it
 * and answers with a deterministic summary.
 */
export const SUMMARIZATION_REQUEST =
  "Pause the task here. This conversation is about to be replaced by a short handoff note, and whoever continues will see only that note and the most recent user messages. Write the note now: the user's goals and constraints, what has been done so far and with what result, decisions taken and why, open questions, and the concrete next steps. Keep exact names (files, functions, commands, identifiers) the work depends on. Reply with the note only.";

/**
 * The first line of the user message that carries a compaction summary. Messages starting with it
 * are not carried into the next compaction's kept user messages (the new summary covers them).
 */
export const SUMMARY_PREFIX =
  "Earlier turns of this conversation were condensed to save context. The user messages above are the most recent ones, kept as written; the note below summarizes everything else.";

/** The `<turn_aborted>` user fragment as a history message (reference §2.2, §5.4 step 8). */
export function turnAbortedMessage(): MessageItem {
  const { start, end } = MARKERS.turnAborted;
  return fragmentToMessage(fragment("user", start, end, `\n${TURN_ABORTED_GUIDANCE}\n`));
}

/** The user message that holds a compaction summary behind `SUMMARY_PREFIX`. */
export function summaryMessage(summary: string): MessageItem {
  return {
    type: "message",
    role: "user",
    content: [{ type: "input_text", text: `${SUMMARY_PREFIX}\n\n${summary}` }],
  };
}

/** Whether a message is a compaction summary written by `summaryMessage`. */
export function isSummaryMessage(item: MessageItem): boolean {
  const first = item.content[0];
  return (
    item.role === "user" && first?.type === "input_text" && first.text.startsWith(SUMMARY_PREFIX)
  );
}

/** The summarization request as the extra user message of a compaction prompt. */
export function summarizationRequestMessage(): MessageItem {
  return {
    type: "message",
    role: "user",
    content: [{ type: "input_text", text: SUMMARIZATION_REQUEST }],
  };
}
