import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { type LocalWorker, startLocalWorker } from "./local-worker.ts";

/**
 * Registers a worker on a fresh persist folder for the file's tests (started before them,
 * stopped and its folder removed after), with `vars` (read when it starts). `restart()` is a real
 * restart on the same storage; `persistDir()` is the folder, for tests that look at its files.
 */
export function persistedWorker(
  prefix: string,
  vars: () => Record<string, string> = () => ({}),
): {
  base: () => URL;
  restart: () => Promise<void>;
  persistDir: () => string;
} {
  let persistDir: string | undefined;
  let worker: LocalWorker | undefined;
  beforeAll(async () => {
    persistDir = await mkdtemp(join(tmpdir(), prefix));
    worker = await startLocalWorker(persistDir, vars());
  });
  afterAll(async () => {
    try {
      await worker?.dispose();
    } finally {
      worker = undefined;
      if (persistDir) await rm(persistDir, { recursive: true, force: true });
    }
  });
  return {
    base: () => {
      if (!worker) throw new Error("the worker is not running");
      return worker.url;
    },
    persistDir: () => {
      if (!persistDir) throw new Error("the worker has no persist folder yet");
      return persistDir;
    },
    restart: async () => {
      const old = worker;
      worker = undefined;
      await old?.dispose();
      worker = await startLocalWorker(persistDir ?? "", vars());
    },
  };
}
