/**
 * A hook's or an endpoint's signing secret, with the previous one after a rotation: it still
 * verifies (a hook) or signs alongside the new one (an endpoint) for 24 hours, so the other side
 * can switch without losing a delivery.
 */
export const PREVIOUS_SECRET_GRACE_MS = 24 * 60 * 60_000;

/** The secret columns of `tenant_hooks` and `tenant_endpoints`. */
export interface SecretColumns {
  secret: string;
  previous_secret: string | null;
  previous_until: number | null;
}

/** The secrets in force at `nowMs` (the current one first), and when the previous one ends. */
export function liveSecrets(
  row: SecretColumns,
  nowMs: number,
): { secrets: string[]; previousUntil: number | null } {
  const previous =
    row.previous_secret !== null && row.previous_until !== null && row.previous_until > nowMs
      ? row.previous_secret
      : undefined;
  return previous === undefined
    ? { secrets: [row.secret], previousUntil: null }
    : { secrets: [row.secret, previous], previousUntil: row.previous_until };
}

/** The columns after rotating to `secret` at `nowMs`: the current one becomes the previous. */
export function rotated(row: SecretColumns, secret: string, nowMs: number): SecretColumns {
  return { secret, previous_secret: row.secret, previous_until: nowMs + PREVIOUS_SECRET_GRACE_MS };
}
