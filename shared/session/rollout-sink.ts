import type { RolloutItem } from "../protocol/index.ts";

/**
 * Where the engine writes rollout items. `append` is synchronous on purpose: the Durable Object
 * appends each item to SQLite in the same synchronous step in which the engine changes memory, so
 * memory is never ahead of storage (design §6, invariant 5).
 */
export interface RolloutSink {
  append(item: RolloutItem): void;
}

/** Collects items in memory: for tests and for callers that persist in a batch. */
export class MemoryRolloutSink implements RolloutSink {
  readonly items: RolloutItem[] = [];
  append(item: RolloutItem): void {
    this.items.push(item);
  }
}
