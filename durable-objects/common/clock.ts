import type { Clock } from "../../shared/ports/index.ts";

/** The platform's clock; tests pass a clock of their own where time matters. */
export const systemClock: Clock = { nowMs: () => Date.now() };

const DAY_MS = 86_400_000;

/** The UTC day of a time, `YYYY-MM-DD`: the day of `tokens_per_day` and of usage buckets. */
export function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Whole seconds from `ms` to the next UTC midnight (at least 1). */
export function secondsToNextUtcDay(ms: number): number {
  const next = (Math.floor(ms / DAY_MS) + 1) * DAY_MS;
  return Math.max(1, Math.ceil((next - ms) / 1000));
}
