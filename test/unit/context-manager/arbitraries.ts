import fc from "fast-check";
import type { ResponseItem } from "../../../shared/protocol/index.ts";
import {
  assistant,
  customCall,
  customOutput,
  developer,
  functionCall,
  functionOutput,
  image,
  localShellCall,
  message,
  user,
} from "./builders.ts";

type CallKind = "function" | "custom" | "shell" | "shell-without-call-id";

type Op =
  | { kind: "user" | "assistant" | "developer" | "image"; text: string }
  | {
      kind: "call";
      call: CallKind;
      withItemId: boolean;
      output: "none" | "match" | "wrong";
      delay: number;
    }
  | { kind: "orphan"; output: "function" | "custom" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constantFrom("user", "assistant", "developer", "image"),
    text: fc.string({ maxLength: 8 }),
  }),
  fc.record({
    kind: fc.constant("call"),
    call: fc.constantFrom<CallKind>("function", "custom", "shell", "shell-without-call-id"),
    withItemId: fc.boolean(),
    output: fc.constantFrom("none", "match", "wrong"),
    delay: fc.nat({ max: 4 }),
  }),
  fc.record({ kind: fc.constant("orphan"), output: fc.constantFrom("function", "custom") }),
) as fc.Arbitrary<Op>;

/**
 * Histories shaped like the ones a session records: call ids are unique, and a call's output (if
 * any) comes after it, possibly with other items in between. Outputs may be missing, of the
 * wrong kind for their call, or orphans with no call at all.
 */
export function buildHistory(ops: readonly Op[]): ResponseItem[] {
  const items: ResponseItem[] = [];
  let pending: { due: number; item: ResponseItem }[] = [];
  ops.forEach((op, i) => {
    switch (op.kind) {
      case "user":
        items.push(user(op.text));
        break;
      case "assistant":
        items.push(assistant(op.text));
        break;
      case "developer":
        items.push(developer(op.text));
        break;
      case "image":
        items.push(message("user", [image(`data:image/png;base64,${op.text}`)]));
        break;
      case "orphan":
        items.push(
          op.output === "function" ? functionOutput(`orphan-${i}`) : customOutput(`orphan-${i}`),
        );
        break;
      case "call": {
        const callId = `call-${i}`;
        const itemId = op.withItemId ? `item-${i}` : undefined;
        if (op.call === "shell-without-call-id") {
          items.push(localShellCall(null, itemId));
          break;
        }
        items.push(
          op.call === "function"
            ? functionCall(callId, itemId)
            : op.call === "custom"
              ? customCall(callId, itemId)
              : localShellCall(callId, itemId),
        );
        if (op.output === "none") break;
        const functionKind = op.call !== "custom";
        const matchingKind = op.output === "match" ? functionKind : !functionKind;
        const output = matchingKind
          ? functionOutput(callId, [
              { type: "input_text", text: "out" },
              image("data:image/png;base64,AA"),
            ])
          : customOutput(callId);
        pending.push({ due: i + op.delay, item: output });
        break;
      }
    }
    items.push(...pending.filter((p) => p.due <= i).map((p) => p.item));
    pending = pending.filter((p) => p.due > i);
  });
  items.push(...pending.map((p) => p.item));
  return items;
}

export const historyArb = fc.array(opArb, { maxLength: 30 }).map(buildHistory);
export const modalitiesArb = fc.constantFrom<("text" | "image")[]>(["text"], ["text", "image"]);
