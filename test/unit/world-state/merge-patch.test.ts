import fc from "fast-check";
import { describe, expect, test } from "vitest";
import type { JsonObject, JsonValue } from "../../../shared/protocol/index.ts";
import {
  applyMergePatch,
  mergePatchFrom,
  removeNullObjectFields,
} from "../../../shared/world-state/index.ts";

describe("removeNullObjectFields", () => {
  test("drops null object members at every depth but leaves arrays untouched", () => {
    const value: JsonValue = {
      value: "current",
      optional: null,
      nested: { gone: null, kept: 1, deeper: { gone: null } },
      array: [{ value: null }, null],
    };
    expect(removeNullObjectFields(value)).toEqual({
      value: "current",
      nested: { kept: 1, deeper: {} },
      array: [{ value: null }, null],
    });
  });

  test("returns null itself and scalars unchanged, and does not modify its input", () => {
    expect(removeNullObjectFields(null)).toBeNull();
    expect(removeNullObjectFields("x")).toBe("x");
    const value: JsonObject = { a: null };
    removeNullObjectFields(value);
    expect(value).toEqual({ a: null });
  });
});

describe("mergePatchFrom", () => {
  test("snapshot_merge_patch_changes_and_removes_nested_values (catalog 7)", () => {
    const previous: JsonObject = {
      kept: { same: true, changed: "before", removed: true },
      removed_section: { value: true },
    };
    const current: JsonObject = { kept: { same: true, changed: "after" } };
    const patch = mergePatchFrom(previous, current);
    expect(patch).toEqual({ kept: { changed: "after", removed: null }, removed_section: null });
    expect(applyMergePatch(previous, patch ?? {})).toEqual(current);
    expect(mergePatchFrom(current, current)).toBeUndefined();
  });

  test("json_diff_reconstructs_current_state (catalog 8)", () => {
    const previous: JsonObject = { alpha: { value: "old" }, beta: { value: "removed" } };
    const current: JsonObject = { alpha: { value: "new" } };
    const patch = mergePatchFrom(previous, current);
    expect(patch).toEqual({ alpha: { value: "new" }, beta: null });
    expect(applyMergePatch(previous, patch ?? {})).toEqual(current);
  });

  test("emits removals first, then current sections in sorted order", () => {
    const patch = mergePatchFrom({ zeta: 1, gone: 1, alpha: 1 }, { zeta: 2, beta: 3, alpha: 2 });
    expect(Object.keys(patch ?? {})).toEqual(["gone", "alpha", "beta", "zeta"]);
  });

  test("sends a new section whole", () => {
    expect(mergePatchFrom({}, { fresh: { a: [1, 2], b: { c: "d" } } })).toEqual({
      fresh: { a: [1, 2], b: { c: "d" } },
    });
  });

  test("replaces arrays whole instead of diffing their elements", () => {
    expect(mergePatchFrom({ s: { list: [1, 2, 3] } }, { s: { list: [1, 2, 4] } })).toEqual({
      s: { list: [1, 2, 4] },
    });
  });

  test("replaces an object with a scalar whole", () => {
    expect(mergePatchFrom({ s: { a: { b: 1 } } }, { s: { a: "flat" } })).toEqual({
      s: { a: "flat" },
    });
  });

  test("gives an empty object patch when a non-object becomes {}", () => {
    expect(mergePatchFrom({ s: [1] }, { s: {} })).toEqual({ s: {} });
    expect(mergePatchFrom({ s: { a: "x" } }, { s: { a: {} } })).toEqual({ s: { a: {} } });
    expect(applyMergePatch({ s: [1] }, { s: {} })).toEqual({ s: {} });
  });

  test("sends all members of an object that replaces a non-object", () => {
    expect(mergePatchFrom({ s: "scalar" }, { s: { a: 1, b: [true] } })).toEqual({
      s: { a: 1, b: [true] },
    });
  });
});

describe("applyMergePatch", () => {
  test("a top-level null removes the section", () => {
    expect(applyMergePatch({ a: { x: 1 }, b: 2 }, { a: null })).toEqual({ b: 2 });
  });

  test("strips nulls nested inside newly inserted objects", () => {
    expect(applyMergePatch({}, { fresh: { keep: 1, drop: null, inner: { drop: null } } })).toEqual({
      fresh: { keep: 1, inner: {} },
    });
    expect(applyMergePatch({ s: { a: 1 } }, { s: { b: { c: null, d: 2 } } })).toEqual({
      s: { a: 1, b: { d: 2 } },
    });
  });

  test("keeps nulls inside arrays, which replace the target whole", () => {
    expect(applyMergePatch({ s: { list: [1] } }, { s: { list: [{ value: null }, null] } })).toEqual(
      { s: { list: [{ value: null }, null] } },
    );
  });

  test("turns a non-object target into an object before merging", () => {
    expect(applyMergePatch({ s: "text" }, { s: { a: 1, b: null } })).toEqual({ s: { a: 1 } });
    expect(applyMergePatch({ s: { a: [1] } }, { s: { a: { b: 2 } } })).toEqual({
      s: { a: { b: 2 } },
    });
  });

  test("replaces a section with a scalar or an array", () => {
    expect(applyMergePatch({ s: { a: 1 } }, { s: 5 })).toEqual({ s: 5 });
    expect(applyMergePatch({ s: { a: 1 } }, { s: ["x"] })).toEqual({ s: ["x"] });
  });

  test("does not modify the snapshot or the patch, and shares no structure with them", () => {
    const snapshot: JsonObject = { s: { a: { b: 1 } }, t: [1] };
    const patch: JsonObject = { s: { a: { c: 2 } }, u: { v: [3] } };
    const result = applyMergePatch(snapshot, patch);
    expect(snapshot).toEqual({ s: { a: { b: 1 } }, t: [1] });
    expect(patch).toEqual({ s: { a: { c: 2 } }, u: { v: [3] } });
    ((result.u as JsonObject).v as JsonValue[]).push(4);
    (result.t as JsonValue[]).push(2);
    expect(patch).toEqual({ s: { a: { c: 2 } }, u: { v: [3] } });
    expect(snapshot.t).toEqual([1]);
  });

  test("returns sections in sorted key order", () => {
    expect(Object.keys(applyMergePatch({ b: 1, a: 1 }, { c: 1 }))).toEqual(["a", "b", "c"]);
  });

  test("treats __proto__ as an ordinary key", () => {
    const previous = JSON.parse('{"s":{"__proto__":{"a":1}}}') as JsonObject;
    const current = JSON.parse('{"s":{"__proto__":{"a":2}}}') as JsonObject;
    const patch = mergePatchFrom(previous, current);
    expect(JSON.stringify(patch)).toBe('{"s":{"__proto__":{"a":2}}}');
    expect(JSON.stringify(applyMergePatch(previous, patch ?? {}))).toBe(JSON.stringify(current));
  });
});

/** JSON whose objects hold no nulls (nulls may appear in arrays), as snapshots are. */
const snapshotValue: fc.Arbitrary<JsonValue> = fc
  .letrec<{ value: JsonValue }>((tie) => ({
    value: fc.oneof(
      { depthSize: "small" },
      fc.oneof(
        fc.string(),
        fc.integer(),
        fc.boolean(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
      ),
      fc.array(fc.oneof(tie("value"), fc.constant(null)), { maxLength: 4 }),
      fc.dictionary(fc.string({ maxLength: 6 }), tie("value"), { maxKeys: 5 }),
    ),
  }))
  .value.map((value) => JSON.parse(JSON.stringify(value)) as JsonValue);

const snapshot = fc.dictionary(fc.string({ maxLength: 6 }), snapshotValue, { maxKeys: 5 });

/** Two snapshots that share keys and structure often, so patches are not always whole values. */
const snapshotPair = snapshot.chain((previous) =>
  fc.tuple(
    fc.constant(previous),
    fc.oneof(
      snapshot,
      fc.tuple(snapshot, fc.subarray(Object.keys(previous))).map(([fresh, kept]) => {
        const current: JsonObject = JSON.parse(JSON.stringify(fresh));
        for (const key of kept) {
          if (!Object.hasOwn(current, key)) {
            Object.defineProperty(current, key, {
              value: previous[key],
              enumerable: true,
              writable: true,
              configurable: true,
            });
          }
        }
        return JSON.parse(JSON.stringify(current)) as JsonObject;
      }),
    ),
  ),
);

describe("merge patch properties", () => {
  test("applying the patch from previous to current reproduces current", () => {
    fc.assert(
      fc.property(snapshotPair, ([previous, current]) => {
        const patch = mergePatchFrom(previous, current);
        expect(applyMergePatch(previous, patch ?? {})).toEqual(current);
      }),
      { numRuns: 500 },
    );
  });

  test("a snapshot patched against itself gives no patch", () => {
    fc.assert(
      fc.property(snapshot, (value) => {
        expect(mergePatchFrom(value, JSON.parse(JSON.stringify(value)))).toBeUndefined();
      }),
    );
  });

  test("a patch is undefined exactly when the snapshots are equal", () => {
    fc.assert(
      fc.property(snapshotPair, ([previous, current]) => {
        const patch = mergePatchFrom(previous, current);
        const equal = JSON.stringify(sortDeep(previous)) === JSON.stringify(sortDeep(current));
        expect(patch === undefined).toBe(equal);
      }),
    );
  });
});

function sortDeep(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(sortDeep);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortDeep(value[key] as JsonValue)]),
  );
}
