/**
 * The ids of the OpenAI surface (design §17). A conversation is a thread and keeps the thread's
 * id (new ones are minted `conv_…`). A response is a stretch of one turn and carries all it
 * resolves to, so no lookup table can drift from the threads: `resp_{thread}.{turn}.{start}.{inputs}`,
 * where `start` is the index in the turn's items where the response began (0, or where a resume
 * recorded its outputs) and `inputs` how many client items it recorded first. Thread and turn
 * ids are `[A-Za-z0-9_-]`, so `.` splits one way only.
 */

export interface ResponseRef {
  threadId: string;
  turnId: string;
  /** Index in the turn's items where this response's stretch starts. */
  start: number;
  /** How many of the stretch's first client-visible items the client sent (its input). */
  inputs: number;
}

const ID_PART = /^[A-Za-z0-9_-]{1,64}$/;
const COUNT = /^(0|[1-9][0-9]{0,8})$/;

export function responseId(ref: ResponseRef): string {
  return `resp_${ref.threadId}.${ref.turnId}.${ref.start}.${ref.inputs}`;
}

/** The thread and turn a response id names; undefined for anything this surface never minted. */
export function parseResponseId(id: string): ResponseRef | undefined {
  if (!id.startsWith("resp_")) return undefined;
  const parts = id.slice("resp_".length).split(".");
  if (parts.length !== 4) return undefined;
  const [threadId, turnId, start, inputs] = parts as [string, string, string, string];
  if (!ID_PART.test(threadId) || !ID_PART.test(turnId)) return undefined;
  if (!COUNT.test(start) || !COUNT.test(inputs)) return undefined;
  return { threadId, turnId, start: Number(start), inputs: Number(inputs) };
}

/** A new conversation's thread id. */
export function newConversationId(): string {
  return `conv_${crypto.randomUUID().replaceAll("-", "")}`;
}
