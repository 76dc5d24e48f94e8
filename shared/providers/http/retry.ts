/** Retry timing for the HTTP providers: exponential backoff with full jitter, or `Retry-After`. */

export const RETRY_BASE_DELAY_MS = 500;
export const RETRY_MAX_DELAY_MS = 8_000;

/**
 * The pause before attempt `failedAttempt + 1` when the server did not say how long to wait:
 * "full jitter", a uniform draw in `[0, min(cap, base · 2^(failedAttempt-1)))`, so that many
 * clients hit by one outage do not retry in lockstep.
 */
export function backoffDelayMs(
  failedAttempt: number,
  random: () => number,
  baseMs = RETRY_BASE_DELAY_MS,
  capMs = RETRY_MAX_DELAY_MS,
): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.max(0, failedAttempt - 1));
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.floor(r * ceiling);
}

/**
 * How long the server asked us to wait, in ms, or undefined when it did not say (or said
 * something unreadable). Reads OpenAI's `retry-after-ms` first, then `Retry-After` as
 * delay-seconds or an HTTP-date (RFC 9110 §10.2.3); a date in the past means "now".
 */
export function retryAfterMs(headers: Headers, nowMs: number): number | undefined {
  const ms = headers.get("retry-after-ms")?.trim();
  if (ms && /^\d+(\.\d+)?$/.test(ms)) return Math.ceil(Number(ms));
  const value = headers.get("retry-after")?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000);
  // An HTTP-date always names its day or month; this keeps `-3` and the like from reading as
  // a (far past) year.
  if (!/[A-Za-z]/.test(value)) return undefined;
  const at = Date.parse(value);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - nowMs);
}
