import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  decodeTurnGroup,
  decodeTurnRow,
  encodeTurnGroup,
  encodeTurnRow,
  type TurnRow,
  turnIdHash,
} from "../../../../../durable-objects/thread/storage/turn-rows.ts";

const ROW: TurnRow = {
  id: "turn_01a2299d-b8f9-701a-89e2-dc9d5c4ee1c5",
  ordinal: 120,
  kind: "turn",
  status: "completed",
  first_seq: 120,
  last_seq: 128,
  pending_calls: [],
  usage: {
    input_tokens: 1234,
    cached_input_tokens: 0,
    output_tokens: 20,
    reasoning_output_tokens: 0,
    total_tokens: 1254,
  },
  error: null,
};

describe("turn row encoding", () => {
  it("round-trips a row and keeps the stored body small", () => {
    const body = encodeTurnRow(ROW);
    expect(body.length).toBeLessThan(110);
    expect(decodeTurnRow({ turn_id: ROW.id, ordinal: ROW.ordinal, body })).toEqual(ROW);
    const paused: TurnRow = {
      ...ROW,
      status: "requires_action",
      usage: null,
      pending_calls: [{ type: "function_call", name: "f", arguments: "{}", call_id: "c" }],
      queued_input: [[{ type: "input_text", text: "x" }]],
    };
    expect(
      decodeTurnRow({ turn_id: ROW.id, ordinal: ROW.ordinal, body: encodeTurnRow(paused) }),
    ).toEqual(paused);
  });
});

const count = fc.integer({ min: 0, max: 2_000_000 });
const usage = fc.option(
  fc.record({
    input_tokens: count,
    cached_input_tokens: count,
    output_tokens: count,
    reasoning_output_tokens: count,
    total_tokens: count,
  }),
);
const seq = fc.integer({ min: 0, max: 1_000_000 });
/** Any row a group may hold: seqs in any order, spans of -1 (a turn that wrote no line), etc. */
const row: fc.Arbitrary<TurnRow> = fc
  .record({
    id: fc.string({ minLength: 1 }),
    ordinal: seq,
    kind: fc.constantFrom("turn" as const, "compaction" as const, undefined),
    status: fc.constantFrom("completed" as const, "failed" as const, "interrupted" as const),
    first_seq: seq,
    span: fc.integer({ min: -1, max: 50 }),
    usage,
    error: fc.option(
      fc.record({ code: fc.constant("provider_error" as const), message: fc.string() }),
    ),
  })
  .map(({ span, kind, ...rest }) => ({
    ...rest,
    ...(kind ? { kind } : {}),
    last_seq: rest.first_seq + span,
    pending_calls: [],
  }));

describe("turn groups: a group row holds its turns by column", () => {
  it("decodes to exactly the rows it was made of, in order", () => {
    fc.assert(
      fc.property(fc.array(row, { maxLength: 40 }), (rows) => {
        expect(decodeTurnGroup(encodeTurnGroup(rows))).toEqual(rows);
      }),
    );
  });

  it("keeps a short chat turn near 17 bytes, half of what whole rows compress to", () => {
    const rows: TurnRow[] = [];
    let first = 3;
    for (let i = 0; i < 256; i++) {
      const input = 349 + 98 * i;
      const output = 43 + (i % 3);
      const hex = (1_700_000_000_000 + 9 * i).toString(16).padStart(12, "0");
      const random = ((i * 2_654_435_761) >>> 0).toString(16).padStart(8, "0");
      rows.push({
        ...ROW,
        id: `turn_${hex.slice(0, 8)}-${hex.slice(8)}-7${random.slice(0, 3)}-8${random.slice(3, 6)}-${random}${random.slice(0, 4)}`,
        ordinal: first,
        first_seq: first,
        last_seq: first + 6,
        usage: {
          input_tokens: input,
          cached_input_tokens: 0,
          output_tokens: output,
          reasoning_output_tokens: 0,
          total_tokens: input + output,
        },
      });
      first += 7;
    }
    const bytes = encodeTurnGroup(rows).length;
    expect(decodeTurnGroup(encodeTurnGroup(rows))).toEqual(rows);
    expect(bytes / rows.length).toBeLessThan(20);
  });
});

describe("turnIdHash", () => {
  it("is 32-bit FNV-1a of the id, big-endian", () => {
    // FNV-1a("a") = 0xe40c292c, FNV-1a("") = the offset basis.
    expect([...turnIdHash("a")]).toEqual([0xe4, 0x0c, 0x29, 0x2c]);
    expect([...turnIdHash("")]).toEqual([0x81, 0x1c, 0x9d, 0xc5]);
    expect(turnIdHash("turn_a")).not.toEqual(turnIdHash("turn_b"));
  });
});
