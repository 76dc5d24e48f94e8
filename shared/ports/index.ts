/**
 * What the core needs from the outside world. The Durable Object (or a test) passes these in;
 * the core never reads a global clock or random source on its own.
 */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  nowMs(): number;
}

export interface IdSource {
  /** A fresh UUIDv7 string (time-ordered). */
  uuidv7(): string;
}

/** A clock that returns fixed, advancing times: for tests and deterministic replays. */
export function fixedClock(startMs: number, stepMs = 0): Clock {
  let t = startMs - stepMs;
  return {
    nowMs() {
      t += stepMs;
      return t;
    },
  };
}

/** Ids `prefix-000001`, `prefix-000002`, …: for tests. */
export function sequentialIds(prefix = "id"): IdSource {
  let n = 0;
  return {
    uuidv7() {
      n += 1;
      return `${prefix}-${String(n).padStart(6, "0")}`;
    },
  };
}
