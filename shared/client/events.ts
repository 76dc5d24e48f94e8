/**
 * Spindle's event streams as typed values: `event:` is the event's `type`, `id:` its `seq`,
 * `data:` the `ThreadEvent` as JSON; an `error` event (data: a problem document, no id) says the
 * stream broke off, and is thrown so a `for await` cannot mistake it for the end of a turn.
 */
import type { components } from "./api-types.ts";
import { readServerSentEvents } from "./sse.ts";

export type ThreadEvent = components["schemas"]["ThreadEvent"];
export type Problem = components["schemas"]["Problem"];

/** A stream that broke off after it started; resume from `lastEventId` on `…/events`. */
export class SpindleStreamError extends Error {
  override readonly name = "SpindleStreamError";
  /** The server's problem document (`code` `internal` for a broken upstream). */
  readonly problem: Problem;
  /** The id of the last event received, `""` when none: send it as `Last-Event-ID`. */
  readonly lastEventId: string;

  // No parameter properties: the file stays runnable by Node's type stripping.
  constructor(problem: Problem, lastEventId: string) {
    super(problem.detail || problem.title);
    this.problem = problem;
    this.lastEventId = lastEventId;
  }
}

/** The `ThreadEvent`s of a `text/event-stream` body; throws `SpindleStreamError` on `error`. */
export async function* readThreadEvents(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<ThreadEvent, void, undefined> {
  for await (const message of readServerSentEvents(body)) {
    const value: unknown = JSON.parse(message.data);
    if (message.event === "error") {
      throw new SpindleStreamError(value as Problem, message.lastEventId);
    }
    // The server writes only ThreadEvents; they are not validated again here (no zod in the client).
    yield value as ThreadEvent;
  }
}
