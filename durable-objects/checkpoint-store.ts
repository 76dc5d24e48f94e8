import { type Checkpoint, parseCheckpoint } from "../shared/rollout/index.ts";
import { gunzip, gzip } from "./gzip.ts";
import type { Sql } from "./sql.ts";

/**
 * Headroom below the 2 MB per-row limit of Durable Object SQLite (not enforced by local workerd,
 * so the chunking is ours to keep).
 */
export const CHECKPOINT_CHUNK_MAX_BYTES = 1_800_000;

/** Splits bytes into chunks of at most `max` bytes. */
export function chunkBytes(bytes: Uint8Array, max = CHECKPOINT_CHUNK_MAX_BYTES): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += max) chunks.push(bytes.subarray(i, i + max));
  return chunks.length > 0 ? chunks : [new Uint8Array()];
}

/** The newest checkpoint of a thread, gzip-compressed in chunked rows. */
export class CheckpointStore {
  readonly #sql: Sql;
  readonly #storage: DurableObjectStorage;

  constructor(sql: Sql, storage: DurableObjectStorage) {
    this.#sql = sql;
    this.#storage = storage;
  }

  /** Compresses, then replaces the stored checkpoint in one transaction. Returns its size. */
  save(checkpoint: Checkpoint): number {
    const bytes = gzip(JSON.stringify(checkpoint));
    const chunks = chunkBytes(bytes);
    this.#storage.transactionSync(() => {
      this.#sql`DELETE FROM spindle_checkpoint`;
      chunks.forEach((chunk, i) => {
        // Copy: a subarray's buffer is the whole compressed blob.
        this
          .#sql`INSERT INTO spindle_checkpoint (chunk, data) VALUES (${i}, ${chunk.slice().buffer})`;
      });
    });
    return bytes.length;
  }

  load(): Checkpoint | undefined {
    const rows = this.#sql<{
      data: ArrayBuffer;
    }>`SELECT data FROM spindle_checkpoint ORDER BY chunk`.toArray();
    if (rows.length === 0) return undefined;
    const total = rows.reduce((n, r) => n + r.data.byteLength, 0);
    const joined = new Uint8Array(total);
    let offset = 0;
    for (const r of rows) {
      joined.set(new Uint8Array(r.data), offset);
      offset += r.data.byteLength;
    }
    return parseCheckpoint(gunzip(joined));
  }

  clear(): void {
    this.#sql`DELETE FROM spindle_checkpoint`;
  }
}
