/** A share is at least this part of the day's tokens neither used nor reserved. */
export const TOKEN_SHARE_PARTS = 4;

/**
 * How `tokens_per_day` answers an admission that reserves `tokens`: admitted with a share (the
 * tokens reserved for the thread's lease, at least `tokens`), or refused because the day's
 * tokens are used, or because the rest is reserved by other threads.
 */
export type TokenAnswer = { share: number } | { refused: "used" | "reserved" };

/**
 * The admission rule of `tokens_per_day` (design §11), given the day's tokens `used` (counted)
 * and `reserved` by other threads' holds (shares less what the tenant has counted of them):
 * - no admission once `used` reaches `limit`;
 * - an admission whose reservation fits in what is neither used nor reserved gets a share of at
 *   least its reservation, and a quarter of that rest when larger (the thread's next tasks start
 *   on it without asking);
 * - one that does not fit is refused while anything is reserved; with nothing reserved, it is
 *   admitted with exactly its reservation: the turn that goes past the limit runs alone.
 *
 * Why the day's usage stays below `limit` plus what that one turn uses: let committed be `used`
 * plus every hold's reservation. A thread spends only within its share (a task starts only if
 * its reservation fits in what is left of it), so the day's real usage, counted or not yet, is
 * at most committed. Counting usage moves tokens from reserved to used, and releases only lower
 * reserved, so committed grows only here: a fitting admission leaves it at most `limit`; one
 * past the limit finds nothing else reserved (so no other thread's usage is uncounted, and no
 * other task runs) and `used` below `limit`, and leaves committed above `limit`, so nothing else
 * is admitted until that turn ends and its usage is counted. So the day ends at most `limit`, or
 * below `limit` plus what the one turn admitted past it used (at most its reservation).
 */
export function tokenShare(
  limit: number,
  used: number,
  reserved: number,
  tokens: number,
): TokenAnswer {
  if (used >= limit) return { refused: "used" };
  const left = limit - used - reserved;
  if (tokens <= left) return { share: Math.max(tokens, Math.floor(left / TOKEN_SHARE_PARTS)) };
  if (reserved > 0) return { refused: "reserved" };
  return { share: tokens };
}
