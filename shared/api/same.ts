/**
 * True when `A` and `B` are the same type both ways. Documentation schemas describe the types the
 * code uses, and a tuple of `Same<…>` checks set to `true` makes a drift between them fail to
 * compile. (Mutual assignability does not notice an added optional field.)
 */
type Extends<A, B> = [A] extends [B] ? true : false;
export type Same<A, B> = Extends<A, B> extends true ? Extends<B, A> : false;
