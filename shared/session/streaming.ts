import type { MessageItem, ResponseItem } from "../protocol/index.ts";
import type { ModelClient, ModelEvent, ModelPrompt } from "../providers/index.ts";

/**
 * Drains one model request into `onEvent`; returns true when it ended because `signal` aborted
 * (the stream threw or ended after the abort). Events after the abort are not delivered.
 */
export async function streamModel(
  client: ModelClient,
  prompt: ModelPrompt,
  signal: AbortSignal | undefined,
  onEvent: (event: ModelEvent) => void,
): Promise<boolean> {
  if (signal?.aborted) return true;
  try {
    for await (const event of client.stream(prompt, signal)) {
      if (signal?.aborted) break;
      onEvent(event);
    }
  } catch (err) {
    if (!signal?.aborted) throw err;
  }
  return signal?.aborted === true;
}

export function isAssistantMessage(item: ResponseItem): item is MessageItem {
  return item.type === "message" && item.role === "assistant";
}

export function messageText(item: MessageItem): string {
  return item.content.map((p) => ("text" in p ? p.text : "")).join("");
}
