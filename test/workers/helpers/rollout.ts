import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { checkRollout, type RolloutCheck, type SegmentText } from "../../helpers/rollout-check.ts";
import { tenantPath, threadObjectOf } from "./tenancy.ts";

async function gunzip(bytes: ArrayBuffer): Promise<string> {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).text();
}

/**
 * Reads a thread's SQLite tail and R2 segments and checks them together. SQLite first: a flush and
 * a checkpoint that run between the two reads (the alarm) move lines from SQLite to R2, never
 * back, so read in this order no line can fall between them.
 */
export async function checkThreadRollout(
  threadId: string,
  tenant = "local",
): Promise<RolloutCheck> {
  // A managed tenant's objects and R2 keys carry its incarnation.
  const path = await tenantPath(tenant);
  const rows = await runInDurableObject(await threadObjectOf(tenant, threadId), (_i, state) =>
    state.storage.sql
      .exec<{ seq: number; part: number; line: string }>(
        "SELECT seq, part, line FROM spindle_rollout ORDER BY seq, part",
      )
      .toArray(),
  );
  const segments: SegmentText[] = [];
  const prefix = `threads/${path}/${threadId}/`;
  const listed = await env.ROLLOUT.list({
    prefix: `${prefix}segments/`,
    include: ["customMetadata"],
  });
  // Segments a thread deleted under this id kept for its forks are not this thread's.
  const tombstone = await env.ROLLOUT.head(`${prefix}tombstone.json`);
  const deletedCreatedAt = tombstone?.customMetadata?.thread_created_at ?? "";
  for (const object of listed.objects) {
    if (tombstone && (object.customMetadata?.thread_created_at ?? "") <= deletedCreatedAt) continue;
    const body = await env.ROLLOUT.get(object.key);
    if (!body) throw new Error(`missing ${object.key}`);
    segments.push({
      key: object.key,
      first_seq: Number(object.customMetadata?.first_seq),
      text: await gunzip(await body.arrayBuffer()),
    });
  }
  // A fork's borrowed segments, the part of each it uses.
  const borrowed = await env.ROLLOUT.get(`${prefix}fork-prefix.json`);
  const shared = borrowed
    ? (
        (await borrowed.json()) as {
          segments: { r2_key: string; first_seq: number; last_seq: number }[];
        }
      ).segments
    : [];
  for (const segment of shared) {
    const body = await env.ROLLOUT.get(segment.r2_key);
    if (!body) throw new Error(`missing borrowed ${segment.r2_key}`);
    const first = Number(body.customMetadata?.first_seq);
    const lines = (await gunzip(await body.arrayBuffer())).split("\n").filter((l) => l !== "");
    segments.push({
      key: segment.r2_key,
      first_seq: segment.first_seq,
      borrowed: true,
      text: `${lines.slice(segment.first_seq - first, segment.last_seq - first + 1).join("\n")}\n`,
    });
  }
  // A long line is stored in parts; join them back.
  const tail: { seq: number; line: string }[] = [];
  for (const row of rows) {
    const last = tail.at(-1);
    if (row.part > 0 && last?.seq === row.seq) last.line += row.line;
    else tail.push({ seq: row.seq, line: row.line });
  }
  return checkRollout(segments, tail);
}

/** SQLite rows of a thread's tables, for assertions. */
export async function sqlRows<T extends Record<string, SqlStorageValue>>(
  threadId: string,
  query: string,
  tenant = "local",
): Promise<T[]> {
  return runInDurableObject(await threadObjectOf(tenant, threadId), (_i, state) =>
    state.storage.sql.exec<T>(query).toArray(),
  );
}
