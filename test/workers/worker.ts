/**
 * The worker the workerd suites run (`test/workers/wrangler.toml`): the production app, with the
 * `Thread` class replaced by a subclass that adds inspection methods for tests. Production code
 * carries no test seams.
 */

import { readWholeRollout } from "../../durable-objects/thread/live-thread.ts";
import { Thread } from "../../durable-objects/thread/thread.ts";
import { type Checkpoint, createCheckpoint } from "../../shared/rollout/index.ts";

export { TenantDirectory } from "../../durable-objects/tenant/directory.ts";
export { Tenant } from "../../durable-objects/tenant/tenant.ts";
export { default } from "../../worker/index.ts";

export class TestThread extends Thread {
  /** The live engine state that a cold start must reproduce exactly. */
  async inspectForTesting() {
    const live = await this.loadedThread();
    if (!live) return undefined;
    const { config, history, previousTurnSettings } = live.session.state;
    // Tests compare plain states: stored runs of history are read into items first.
    history.readSealed();
    return {
      config,
      history: history.toState(),
      previousTurnSettings,
      lastSeq: live.log.lastSeq,
      flushedThrough: live.segments.flushedThrough(),
      checkpointSeq: live.checkpoint?.lastSeq,
    };
  }

  /** Stored runs at the front of the live history, and how many of them were never read. */
  async storedRunsForTesting(): Promise<{ runs: number; unread: number } | undefined> {
    const live = await this.loadedThread();
    const runs = live?.session.state.history.toState().sealed ?? [];
    return live && { runs: runs.length, unread: runs.filter((run) => !run.parsed).length };
  }

  /**
   * The history and token info of the checkpoint in memory, and of a checkpoint replayed from the
   * stored lines it covers (undefined: no checkpoint yet).
   */
  async checkpointReplayForTesting() {
    const live = await this.loadedThread();
    const checkpoint = live?.checkpoint;
    if (!live || !checkpoint) return undefined;
    const whole = await readWholeRollout(live.parts, live.meta, live.log);
    const covered = whole.lines.filter((l) => l.seq <= checkpoint.lastSeq).map((l) => l.line);
    const replayed = createCheckpoint(covered, {
      truncation: checkpoint.truncation,
      lastSeq: checkpoint.lastSeq,
    });
    // Plain JSON, stored runs read: what a reload of either would restore.
    const plain = (c: Checkpoint) =>
      JSON.parse(
        JSON.stringify({
          items: [...(c.sealed ?? []).flatMap((run) => run.items), ...c.items],
          tokenInfo: c.tokenInfo ?? null,
        }),
      ) as unknown;
    return { checkpoint: plain(checkpoint), replayed: plain(replayed) };
  }
}
