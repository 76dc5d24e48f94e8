import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { TruncationPolicy } from "../../../shared/context-manager/index.ts";
import type { RolloutLine } from "../../../shared/protocol/index.ts";
import {
  type Checkpoint,
  createCheckpoint,
  extendCheckpoint,
  type NeedsFullReplay,
  type ReconstructedState,
  reconstructFromCheckpoint,
  reconstructRollout,
} from "../../../shared/rollout/index.ts";
import { rolledBackTurns, rollout } from "./arbitraries.ts";
import { rollback, turn } from "./builders.ts";

// A small budget so re-recording truncates some tool outputs.
const truncation: TruncationPolicy = { mode: "tokens", limit: 20 };
const windowSize = fc.constantFrom(0, 1, 2, 3, 64);
// Each property replays every split point of every rollout: allow for slow machines.
const PROPERTY_TIMEOUT_MS = 60_000;

/** What a stored checkpoint reads back as. */
function stored(checkpoint: Checkpoint): Checkpoint {
  const json = JSON.parse(JSON.stringify(checkpoint)) as Checkpoint;
  expect(json).toEqual(checkpoint);
  return json;
}

function isFullReplay(r: ReconstructedState | NeedsFullReplay | Checkpoint): r is NeedsFullReplay {
  return "needsFullReplay" in r;
}

describe("checkpoint + later lines equals full replay (design §10 invariant 7)", () => {
  it(
    "at every split point, unless a rollback after it reaches past the window",
    () => {
      let answered = 0;
      let deferred = 0;
      fc.assert(
        fc.property(rollout, windowSize, (lines, maxRollbackTurns) => {
          const full = reconstructRollout(lines, { truncation });
          for (let k = 0; k <= lines.length; k++) {
            const checkpoint = stored(
              createCheckpoint(lines.slice(0, k), { truncation, maxRollbackTurns }),
            );
            const later = lines.slice(k);
            const result = reconstructFromCheckpoint(checkpoint, later, { truncation });
            if (isFullReplay(result)) {
              deferred += 1;
              // Only a rollback deeper than the window may send the caller to a full replay.
              expect(rolledBackTurns(later)).toBeGreaterThan(maxRollbackTurns);
            } else {
              answered += 1;
              expect(result).toEqual(full);
            }
          }
        }),
        { numRuns: 150 },
      );
      // The runs exercised both outcomes.
      expect(answered).toBeGreaterThan(0);
      expect(deferred).toBeGreaterThan(0);
    },
    PROPERTY_TIMEOUT_MS,
  );

  it(
    "a rollback of the whole window right after a checkpoint is answered from it",
    () => {
      fc.assert(
        fc.property(rollout, windowSize, (lines, maxRollbackTurns) => {
          for (let k = 0; k <= lines.length; k++) {
            const prefix = lines.slice(0, k);
            const checkpoint = createCheckpoint(prefix, { truncation, maxRollbackTurns });
            const later = [rollback(maxRollbackTurns), ...turn({ id: "after", input: "again" })];
            const result = reconstructFromCheckpoint(stored(checkpoint), later, { truncation });
            expect(result).toEqual(reconstructRollout([...prefix, ...later], { truncation }));
          }
        }),
        { numRuns: 150 },
      );
    },
    PROPERTY_TIMEOUT_MS,
  );

  it(
    "a rollback one turn deeper than the window is sent to a full replay when turns remain",
    () => {
      let deferred = 0;
      fc.assert(
        fc.property(rollout, fc.constantFrom(0, 1, 2, 3), (lines, maxRollbackTurns) => {
          const checkpoint = stored(createCheckpoint(lines, { truncation, maxRollbackTurns }));
          const later = [rollback(maxRollbackTurns + 1)];
          const result = reconstructFromCheckpoint(checkpoint, later, { truncation });
          if (isFullReplay(result)) {
            deferred += 1;
            expect(result.reason).toMatch(/rollback reaches 1 user turn\(s\) past/);
          } else {
            expect(result).toEqual(reconstructRollout([...lines, ...later], { truncation }));
          }
        }),
        { numRuns: 150 },
      );
      expect(deferred).toBeGreaterThan(0);
    },
    PROPERTY_TIMEOUT_MS,
  );

  it(
    "a checkpoint of a checkpoint agrees, and equals the direct one when no rollback came between",
    () => {
      fc.assert(
        fc.property(rollout, windowSize, fc.nat(), fc.nat(), (lines, maxRollbackTurns, a, b) => {
          const [k1, k2] = [a % (lines.length + 1), b % (lines.length + 1)].sort((x, y) => x - y);
          const opts = { truncation, maxRollbackTurns };
          const first = stored(createCheckpoint(lines.slice(0, k1), opts));
          const second = extendCheckpoint(first, lines.slice(k1, k2), opts);
          if (isFullReplay(second)) throw new Error(second.reason);
          const direct = createCheckpoint(lines.slice(0, k2), opts);
          if (rolledBackTurns(lines.slice(k1, k2)) === 0) expect(second).toEqual(direct);
          const result = reconstructFromCheckpoint(stored(second), lines.slice(k2), { truncation });
          if (!isFullReplay(result)) {
            expect(result).toEqual(reconstructRollout(lines, { truncation }));
          }
        }),
        { numRuns: 300 },
      );
    },
    PROPERTY_TIMEOUT_MS,
  );

  it(
    "a chain of extensions tracks full replay after every chunk",
    () => {
      fc.assert(
        fc.property(
          rollout,
          windowSize,
          fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 20 }),
          (lines, maxRollbackTurns, sizes) => {
            const opts = { truncation, maxRollbackTurns };
            let checkpoint: Checkpoint = createCheckpoint([], opts);
            let at = 0;
            for (const size of [...sizes, lines.length]) {
              if (at >= lines.length) break;
              const chunk: RolloutLine[] = lines.slice(at, at + size);
              at += chunk.length;
              const next = extendCheckpoint(checkpoint, chunk, opts);
              if (isFullReplay(next)) throw new Error(next.reason);
              checkpoint = stored(next);
              expect(checkpoint.lineCount).toBe(at);
              expect(checkpoint.lastSeq).toBe(at);
              const result = reconstructFromCheckpoint(checkpoint, [], { truncation });
              if (isFullReplay(result)) {
                // Rollbacks use up the window (new turns do not extend it backwards), so only
                // rollbacks adding up to more than it may need the whole rollout.
                expect(rolledBackTurns(lines.slice(0, at))).toBeGreaterThan(maxRollbackTurns);
              } else {
                expect(result).toEqual(reconstructRollout(lines.slice(0, at), { truncation }));
              }
            }
          },
        ),
        { numRuns: 200 },
      );
    },
    PROPERTY_TIMEOUT_MS,
  );
});
