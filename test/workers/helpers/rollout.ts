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
  const listed = await env.ROLLOUT.list({
    prefix: `threads/${path}/${threadId}/segments/`,
    include: ["customMetadata"],
  });
  for (const object of listed.objects) {
    const body = await env.ROLLOUT.get(object.key);
    if (!body) throw new Error(`missing ${object.key}`);
    segments.push({
      key: object.key,
      first_seq: Number(object.customMetadata?.first_seq),
      text: await gunzip(await body.arrayBuffer()),
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
