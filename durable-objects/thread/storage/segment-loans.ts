import type { SharedSegment } from "../../../shared/api/index.ts";
import { describeError } from "../../../shared/observability/index.ts";
import { systemClock } from "../../common/clock.ts";
import { objectLog } from "../../common/log.ts";

/**
 * Forks share R2 segments instead of copying them (design §14). A fork refers to its source's
 * segments for the prefix it copied, and writes only its own lines. What makes that safe:
 *
 * - `{fork}fork-prefix.json` lists the segments a fork borrows, each with the seq range it uses
 *   (a segment the fork's cut falls in is read only up to the cut). It is how a restore from R2
 *   alone finds them; the fork's manifest lists them too.
 * - `{owner}borrowers/{fork}` is a loan marker, written by the source while it answers the fork
 *   (its delete waits for the answers under way, and a source being deleted lends nothing, so
 *   no owner is deleted between the answer and the marker). A fork of a fork is marked at every
 *   owner it reaches.
 * - Deleting an owner that has loans writes `{owner}tombstone.json` first and keeps its
 *   segments. Deleting a fork removes its markers, and the last one out sweeps the owner.
 * - A marker whose fork records nothing of its owner an hour on (the fork never came to exist, or
 *   R2 refused to end the loan) is dropped when loans are looked at.
 * - A thread created again under a deleted owner's id is another incarnation: its objects carry
 *   its creation time (`thread_created_at`), a segment key the kept ones hold is taken with that
 *   time in it, and a restore or a sweep tells the kept objects (created no later than the
 *   tombstone's thread) from the new thread's.
 */
const FORK_PREFIX = "fork-prefix.json";
const TOMBSTONE = "tombstone.json";
const BORROWERS = "borrowers/";
/** The creation time of the thread an object belongs to, in its custom metadata. */
export const CREATED_AT = "thread_created_at";

/** A deleted thread's mark under its prefix: its creation time, and when it was written. */
export interface Tombstone {
  createdAt: string | undefined;
  uploadedMs: number;
}

export async function tombstoneOf(
  bucket: R2Bucket,
  prefix: string,
): Promise<Tombstone | undefined> {
  const head = await bucket.head(`${prefix}${TOMBSTONE}`);
  if (head === null) return undefined;
  return { createdAt: head.customMetadata?.[CREATED_AT], uploadedMs: head.uploaded.getTime() };
}

/**
 * Whether `object` (listed with its custom metadata) belongs to the deleted thread of
 * `tombstone` or an earlier one, not to a thread created under the id since.
 */
export function leftBehind(object: R2Object, tombstone: Tombstone): boolean {
  const created = object.customMetadata?.[CREATED_AT];
  if (created !== undefined && tombstone.createdAt !== undefined) {
    return Date.parse(created) <= Date.parse(tombstone.createdAt);
  }
  return object.uploaded.getTime() <= tombstone.uploadedMs;
}

/** The thread prefix a segment key lies under (`{prefix}segments/…`). */
export function ownerPrefixOf(r2Key: string): string {
  const at = r2Key.lastIndexOf("segments/");
  return at < 0 ? r2Key : r2Key.slice(0, at);
}

/** The owners (thread prefixes other than `own`) whose segments `segments` refer to. */
export function lendersOf(
  segments: readonly Pick<SharedSegment, "r2_key">[],
  own: string,
): string[] {
  return [...new Set(segments.map((s) => ownerPrefixOf(s.r2_key)))].filter((p) => p !== own);
}

/**
 * The segments a fork of the lines before `cut` can borrow: every one whose lines lie in
 * [2, cut) (line 1 is the fork's own `session_meta`), clipped to that range. Only a prefix
 * without gaps is shared: from seq 2 on, each segment starts where the one before ended.
 */
export function shareablePrefix(segments: readonly SharedSegment[], cut: number): SharedSegment[] {
  const shared: SharedSegment[] = [];
  let next = 2;
  for (const s of [...segments].sort((a, b) => a.first_seq - b.first_seq)) {
    const first = Math.max(s.first_seq, 2);
    const last = Math.min(s.last_seq, cut - 1);
    if (last < first) continue;
    if (first !== next) break;
    shared.push({ ...s, first_seq: first, last_seq: last });
    next = last + 1;
  }
  return shared;
}

/** Marks `borrower` as a user of `segments` at each owner (the source does this). */
export async function lend(
  bucket: R2Bucket,
  segments: readonly SharedSegment[],
  borrower: string,
): Promise<void> {
  const body = JSON.stringify({ borrower });
  await Promise.all(
    lendersOf(segments, "").map((owner) => bucket.put(`${owner}${BORROWERS}${borrower}`, body)),
  );
}

/** Records what a fork borrows, for a restore from R2 alone. */
export async function recordBorrowed(
  bucket: R2Bucket,
  prefix: string,
  segments: readonly SharedSegment[],
  createdAt: string,
): Promise<void> {
  await bucket.put(`${prefix}${FORK_PREFIX}`, JSON.stringify({ segments }), {
    httpMetadata: { contentType: "application/json" },
    customMetadata: { [CREATED_AT]: createdAt },
  });
}

/**
 * The segments a fork borrows, as recorded (none for a thread that is not a sharing fork), or
 * `damaged` when the record does not read as one. A read R2 fails throws.
 */
export async function readBorrowed(
  bucket: R2Bucket,
  prefix: string,
): Promise<SharedSegment[] | "damaged"> {
  const object = await bucket.get(`${prefix}${FORK_PREFIX}`);
  if (object === null) return [];
  const text = await object.text();
  try {
    const { segments } = JSON.parse(text) as { segments: unknown };
    if (Array.isArray(segments)) return segments as SharedSegment[];
  } catch {
    // Reported below, as any record that is not one.
  }
  return "damaged";
}

/**
 * Ends `borrower`'s loans at `owners`: its markers go, and an owner deleted meanwhile whose last
 * loan this was is swept.
 */
export async function releaseLoans(
  bucket: R2Bucket,
  owners: readonly string[],
  borrower: string,
): Promise<void> {
  for (const owner of owners) {
    await bucket.delete(`${owner}${BORROWERS}${borrower}`);
    await sweep(bucket, owner);
  }
}

/**
 * Ends the loans of `lent` that `borrower` did not take up: every owner but those of `kept` (the
 * segments it does borrow). A marker R2 does not let go of only keeps a deleted source's
 * segments longer: logged, not fatal.
 */
export async function endUnusedLoans(
  bucket: R2Bucket,
  lent: readonly Pick<SharedSegment, "r2_key">[],
  kept: readonly Pick<SharedSegment, "r2_key">[],
  borrower: { tenant: string; threadId: string },
): Promise<void> {
  const taken = new Set(lendersOf(kept, ""));
  const owners = lendersOf(lent, "").filter((owner) => !taken.has(owner));
  if (owners.length === 0) return;
  await releaseLoans(bucket, owners, borrower.threadId).catch((err: unknown) => {
    objectLog.warn("rollout.release_failed", {
      tenant: borrower.tenant,
      thread: borrower.threadId,
      error: describeError(err),
    });
  });
}

/**
 * Deletes a thread's R2 objects, or, while forks borrow its segments, all but those. With loans,
 * its tombstone is written before they are looked at again: a fork that ends its loan meanwhile
 * either is seen gone here or sees the tombstone and sweeps.
 */
export async function deleteOwnObjects(
  bucket: R2Bucket,
  prefix: string,
  createdAt: string,
): Promise<void> {
  let loaned = await hasLoans(bucket, prefix);
  if (loaned) {
    await bucket.put(`${prefix}${TOMBSTONE}`, JSON.stringify({ created_at: createdAt }), {
      customMetadata: { [CREATED_AT]: createdAt },
    });
    loaned = await hasLoans(bucket, prefix);
  }
  const kept = (key: string) =>
    key.startsWith(`${prefix}segments/`) ||
    key.startsWith(`${prefix}${BORROWERS}`) ||
    key === `${prefix}${TOMBSTONE}`;
  await deleteWhere(bucket, prefix, (o) => !loaned || !kept(o.key));
}

/**
 * Sweeps a deleted owner that no fork borrows from any more: what its tombstone says was left
 * behind. A thread created under the id since keeps its own objects.
 */
export async function sweep(bucket: R2Bucket, prefix: string): Promise<void> {
  const tombstone = await tombstoneOf(bucket, prefix);
  if (tombstone === undefined || (await hasLoans(bucket, prefix))) return;
  await deleteWhere(bucket, prefix, (o) => leftBehind(o, tombstone));
}

/** How long a fork may take to record what it borrows after its source marked the loan. */
export const UNCLAIMED_LOAN_MS = 60 * 60 * 1000;

/**
 * Whether a fork still borrows from the thread at `prefix`. A marker older than
 * `UNCLAIMED_LOAN_MS` whose fork records no segment of this thread is dropped on the way: a loan
 * whose fork never came to exist (the request stopped between the two objects), or whose end R2
 * refused.
 */
async function hasLoans(bucket: R2Bucket, prefix: string): Promise<boolean> {
  const markers = `${prefix}${BORROWERS}`;
  // Threads of one tenant are siblings: `threads/{tenant}/{thread}/`.
  const siblings = prefix.slice(0, prefix.slice(0, -1).lastIndexOf("/") + 1);
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix: markers, cursor });
    for (const marker of page.objects) {
      if (systemClock.nowMs() - marker.uploaded.getTime() < UNCLAIMED_LOAN_MS) return true;
      const fork = `${siblings}${marker.key.slice(markers.length)}/`;
      const borrowed = await readBorrowed(bucket, fork);
      // A record that cannot be read may still name this thread: the loan stays.
      if (borrowed === "damaged") return true;
      if (borrowed.some((s) => ownerPrefixOf(s.r2_key) === prefix)) return true;
      await bucket.delete(marker.key);
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return false;
}

async function deleteWhere(
  bucket: R2Bucket,
  prefix: string,
  chosen: (object: R2Object) => boolean,
): Promise<void> {
  let cursor: string | undefined;
  do {
    const page = await bucket.list({ prefix, cursor, include: ["customMetadata"] });
    const keys = page.objects.filter(chosen).map((o) => o.key);
    if (keys.length > 0) await bucket.delete(keys);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
}
