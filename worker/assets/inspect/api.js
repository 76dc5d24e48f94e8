/**
 * The API as the page uses it: every call carries the key as a bearer header (never in a URL),
 * failures become `ApiProblem`s with the problem document's code and detail.
 */
import { sseDecoder } from "./model.js";

export class ApiProblem extends Error {
  constructor(status, problem) {
    super(problem?.detail ?? problem?.title ?? `HTTP ${status}`);
    this.status = status;
    this.code = problem?.code ?? null;
  }
}

export class Api {
  constructor(key) {
    this.key = key;
  }

  headers(extra = {}) {
    return { authorization: `Bearer ${this.key}`, ...extra };
  }

  async get(path, signal) {
    const res = await fetch(path, {
      headers: this.headers({ accept: "application/json" }),
      signal,
    });
    const body = await res.json().catch(() => null);
    if (!res.ok) throw new ApiProblem(res.status, body);
    return body;
  }

  /**
   * Follows `GET /v1/threads/{id}/events` (EventSource cannot send a bearer header, so fetch and
   * a stream reader), calling `onEvent` for each event. After a break it reconnects with
   * `Last-Event-ID` of the last event seen, so nothing in between is missed; `onStatus` hears
   * "live", "reconnecting" and "expired" (410: the events since then are gone; re-read the
   * thread). Stops when `signal` aborts.
   */
  async follow(threadId, { onEvent, onStatus, signal }) {
    let lastId = null;
    let delay = 500;
    while (!signal.aborted) {
      try {
        const headers = this.headers({ accept: "text/event-stream" });
        if (lastId !== null) headers["last-event-id"] = lastId;
        const res = await fetch(`/v1/threads/${encodeURIComponent(threadId)}/events`, {
          headers,
          signal,
        });
        if (res.status === 410) {
          onStatus("expired");
          return;
        }
        if (!res.ok || !res.body)
          throw new ApiProblem(res.status, await res.json().catch(() => null));
        onStatus("live");
        delay = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        const decode = sseDecoder();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          for (const event of decode(value)) {
            if (event.id !== null) lastId = event.id;
            onEvent(event);
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        if (err instanceof ApiProblem && (err.status === 401 || err.status === 404)) throw err;
      }
      if (signal.aborted) return;
      onStatus("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 10_000);
    }
  }
}
