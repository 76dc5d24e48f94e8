/**
 * The pages of a Durable Object's SQLite file in local workerd, by b-tree, with SQLite's own
 * `dbstat` table and `PRAGMA freelist_count` (which an object may not run on itself): read from a
 * copy of the file and its write-ahead log by the `sqlite3` command, when it is installed.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface FilePages {
  pageSize: number;
  /** Every page of the file, free ones included. */
  pageCount: number;
  /** Pages on the freelist: deleted rows' pages, which later inserts reuse. */
  freePages: number;
  /** Pages of each table and index (overflow pages included). */
  byName: { name: string; pages: number }[];
}

export function filePages(database: string): FilePages | undefined {
  const dir = mkdtempSync(join(tmpdir(), "spindle-pages-"));
  try {
    const copy = join(dir, "copy.sqlite");
    copyFileSync(database, copy);
    if (existsSync(`${database}-wal`)) copyFileSync(`${database}-wal`, `${copy}-wal`);
    const out = execFileSync(
      "sqlite3",
      [
        copy,
        "PRAGMA page_size; PRAGMA page_count; PRAGMA freelist_count;" +
          " SELECT name, COUNT(*) FROM dbstat GROUP BY name ORDER BY name;",
      ],
      { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] },
    );
    const [pageSize, pageCount, freePages, ...rest] = out.trim().split("\n");
    return {
      pageSize: Number(pageSize),
      pageCount: Number(pageCount),
      freePages: Number(freePages),
      byName: rest.map((line) => {
        const [name = "", pages = "0"] = line.split("|");
        return { name, pages: Number(pages) };
      }),
    };
  } catch {
    // No sqlite3 command (or a file it cannot read): the report leaves the table out.
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
