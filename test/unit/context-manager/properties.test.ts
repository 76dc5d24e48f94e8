import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isUserTurnBoundary } from "../../../shared/context/index.ts";
import { ContextManager } from "../../../shared/context-manager/index.ts";
import type { KnownResponseItem, ResponseItem } from "../../../shared/protocol/index.ts";
import { historyArb, modalitiesArb } from "./arbitraries.ts";
import {
  assistant,
  DEFAULT_POLICY,
  developer,
  ENV_CONTEXT,
  functionCall,
  functionOutput,
  interAgent,
  PERMISSIONS,
  snapshot,
  user,
} from "./builders.ts";

/** The call id a call item needs answered, and the output type that answers it. */
function expectedOutput(item: KnownResponseItem): { callId: string; type: string } | undefined {
  if (item.type === "function_call") return { callId: item.call_id, type: "function_call_output" };
  if (item.type === "custom_tool_call") {
    return { callId: item.call_id, type: "custom_tool_call_output" };
  }
  if (item.type === "local_shell_call" && item.call_id !== null) {
    return { callId: item.call_id, type: "function_call_output" };
  }
  return undefined;
}

function isOutput(item: ResponseItem): boolean {
  return item.type === "function_call_output" || item.type === "custom_tool_call_output";
}

describe("forPrompt properties", () => {
  it("leaves history deep-equal to before, with the same item objects", () => {
    fc.assert(
      fc.property(historyArb, modalitiesArb, (history, modalities) => {
        const cm = new ContextManager();
        cm.recordItems(history, DEFAULT_POLICY);
        const objects = [...cm.items];
        const before = snapshot(cm.items);
        cm.forPrompt(modalities);
        expect(cm.items).toEqual(before);
        expect(cm.items.length).toBe(objects.length);
        cm.items.forEach((item, i) => {
          expect(item).toBe(objects[i]);
        });
      }),
    );
  });

  it("pairs every call with exactly one output of the right type, placed after it", () => {
    fc.assert(
      fc.property(historyArb, modalitiesArb, (history, modalities) => {
        const cm = new ContextManager();
        cm.recordItems(history, DEFAULT_POLICY);
        const prompt = cm.forPrompt(modalities);
        prompt.forEach((item, index) => {
          const expected = expectedOutput(item);
          if (expected === undefined) return;
          const answers = prompt
            .map((p, i) => ({ p, i }))
            .filter(
              ({ p }) =>
                (p.type === "function_call_output" || p.type === "custom_tool_call_output") &&
                p.type === expected.type &&
                p.call_id === expected.callId,
            );
          expect(answers).toHaveLength(1);
          expect(answers[0]?.i).toBeGreaterThan(index);
        });
      }),
    );
  });

  it("leaves no orphan output", () => {
    fc.assert(
      fc.property(historyArb, modalitiesArb, (history, modalities) => {
        const cm = new ContextManager();
        cm.recordItems(history, DEFAULT_POLICY);
        const prompt = cm.forPrompt(modalities);
        const answered = new Set(
          prompt.flatMap((item) => {
            const expected = expectedOutput(item);
            return expected === undefined ? [] : [`${expected.type}:${expected.callId}`];
          }),
        );
        for (const item of prompt) {
          if (item.type === "function_call_output" || item.type === "custom_tool_call_output") {
            expect(answered.has(`${item.type}:${item.call_id}`)).toBe(true);
          }
        }
      }),
    );
  });

  it("keeps every non-output item in order", () => {
    fc.assert(
      fc.property(historyArb, (history) => {
        const cm = new ContextManager();
        cm.recordItems(history, DEFAULT_POLICY);
        const prompt = cm.forPrompt(["text", "image"]);
        expect(prompt.filter((i) => !isOutput(i))).toEqual(history.filter((i) => !isOutput(i)));
      }),
    );
  });

  it("is deterministic: two calls give byte-identical prompts", () => {
    fc.assert(
      fc.property(historyArb, modalitiesArb, (history, modalities) => {
        const cm = new ContextManager();
        cm.recordItems(history, DEFAULT_POLICY);
        const first = cm.forPrompt(modalities);
        const second = cm.forPrompt(modalities);
        expect(second).toEqual(first);
        expect(JSON.stringify(second)).toBe(JSON.stringify(first));
        expect(JSON.stringify(cm.clone().forPrompt(modalities))).toBe(JSON.stringify(first));
      }),
    );
  });
});

const turnItemArb: fc.Arbitrary<ResponseItem> = fc.oneof(
  fc.string({ maxLength: 6 }).map((t) => user(`u ${t}`)),
  fc.string({ maxLength: 6 }).map((t) => assistant(t)),
  fc.string({ maxLength: 6 }).map((t) => interAgent(t)),
  fc.constant(user(ENV_CONTEXT)),
  fc.constant(developer(PERMISSIONS)),
  fc.constant(developer(PERMISSIONS, "plain instructions")),
  fc.constant(developer("plain instructions")),
  fc.nat({ max: 1000 }).map((n) => functionCall(`c${n}`)),
  fc.nat({ max: 1000 }).map((n) => functionOutput(`c${n}`)),
);

function countBoundaries(items: readonly ResponseItem[]): number {
  return items.filter(isUserTurnBoundary).length;
}

describe("dropLastNUserTurns properties", () => {
  it("keeps a prefix of history and removes min(n, count) user turns", () => {
    fc.assert(
      fc.property(fc.array(turnItemArb, { maxLength: 25 }), fc.nat({ max: 8 }), (history, n) => {
        const cm = new ContextManager();
        cm.recordItems(history, DEFAULT_POLICY);
        const before = snapshot(cm.items);
        cm.dropLastNUserTurns(n);
        expect(cm.items).toEqual(before.slice(0, cm.items.length));
        const count = countBoundaries(before);
        const expected = n > 0 ? count - Math.min(n, count) : count;
        expect(countBoundaries(cm.items)).toBe(expected);
        if (n === 0) expect(cm.items).toEqual(before);
      }),
    );
  });
});
