import { describe, expect, it } from "vitest";
import {
  ContextManager,
  SYNTHETIC_OUTPUT_NAMESPACE,
} from "../../../shared/context-manager/index.ts";
import { normalizeForPrompt } from "../../../shared/context-manager/normalize.ts";
import type { ResponseItem } from "../../../shared/protocol/index.ts";
import {
  assistant,
  customCall,
  customOutput,
  DEFAULT_POLICY,
  functionCall,
  functionOutput,
  historyWith,
  image,
  localShellCall,
  message,
  snapshot,
  user,
} from "./builders.ts";

const TEXT_ONLY = ["text"] as const;
const WITH_IMAGES = ["text", "image"] as const;
const IMAGE_OMITTED = "image content omitted because you do not support image input";

describe("forPrompt: missing outputs (reference §4.3 step 1)", () => {
  it("normalize_adds_missing_output_for_function_call", () => {
    const cm = historyWith([functionCall("call-x")]);
    expect(cm.forPrompt(TEXT_ONLY)).toEqual([
      functionCall("call-x"),
      { type: "function_call_output", call_id: "call-x", output: "aborted" },
    ]);
  });

  it("normalize_adds_missing_output_for_custom_tool_call: the synthetic output has no name", () => {
    const cm = historyWith([customCall("tool-x")]);
    const prompt = cm.forPrompt(TEXT_ONLY);
    expect(prompt).toEqual([
      customCall("tool-x"),
      { type: "custom_tool_call_output", call_id: "tool-x", output: "aborted" },
    ]);
    expect(prompt[1]).not.toHaveProperty("name");
  });

  it("normalize_adds_missing_output_for_local_shell_call_with_id", () => {
    const cm = historyWith([localShellCall("shell-1")]);
    expect(cm.forPrompt(TEXT_ONLY)).toEqual([
      localShellCall("shell-1"),
      { type: "function_call_output", call_id: "shell-1", output: "aborted" },
    ]);
  });

  it("adds no output for a local shell call without a call id", () => {
    const cm = historyWith([localShellCall(null)]);
    expect(cm.forPrompt(TEXT_ONLY)).toEqual([localShellCall(null)]);
  });

  it("inserts the synthetic output immediately after its call, not at the end", () => {
    const cm = historyWith([user("u"), functionCall("c1"), assistant("a"), user("next")]);
    expect(cm.forPrompt(TEXT_ONLY)).toEqual([
      user("u"),
      functionCall("c1"),
      { type: "function_call_output", call_id: "c1", output: "aborted" },
      assistant("a"),
      user("next"),
    ]);
  });

  it("synthetic output id: a call with an id gets fco_ + uuidv5(namespace, 'fco:{id}')", () => {
    // Expected values computed independently (Python uuid.uuid5) for the namespace below.
    expect(SYNTHETIC_OUTPUT_NAMESPACE).toBe("90d38d3e-6a5b-4d52-bfe2-2f1e634bfac4");
    const cm = historyWith([
      functionCall("c1", "fc_abc"),
      customCall("c2", "ctc_1"),
      localShellCall("c3", "lsh_1"),
    ]);
    expect(cm.forPrompt(TEXT_ONLY)).toEqual([
      functionCall("c1", "fc_abc"),
      {
        type: "function_call_output",
        id: "fco_51c811fa-4a37-5088-8b70-9be8292102d5",
        call_id: "c1",
        output: "aborted",
      },
      customCall("c2", "ctc_1"),
      {
        type: "custom_tool_call_output",
        id: "ctco_ffd2c872-81a7-5a00-b6f6-884096d1f522",
        call_id: "c2",
        output: "aborted",
      },
      localShellCall("c3", "lsh_1"),
      {
        type: "function_call_output",
        id: "fco_37093384-5cd0-5813-8a86-723bfcccbbb2",
        call_id: "c3",
        output: "aborted",
      },
    ]);
  });

  it("synthetic output id: a call without an id, or with an empty id, gets an output without an id", () => {
    const cm = historyWith([functionCall("c1"), functionCall("c2", "")]);
    const prompt = cm.forPrompt(TEXT_ONLY);
    expect(prompt[1]).not.toHaveProperty("id");
    expect(prompt[3]).not.toHaveProperty("id");
  });

  it("synthetic outputs are identical across calls (deterministic)", () => {
    const cm = historyWith([functionCall("c1", "fc_1"), customCall("c2", "ctc_2")]);
    expect(cm.forPrompt(TEXT_ONLY)).toEqual(cm.forPrompt(TEXT_ONLY));
    expect(cm.clone().forPrompt(TEXT_ONLY)).toEqual(cm.forPrompt(TEXT_ONLY));
  });

  it("a custom tool output does not satisfy a function call with the same call id", () => {
    const cm = historyWith([functionCall("same"), customOutput("same")]);
    expect(cm.forPrompt(TEXT_ONLY)).toEqual([
      functionCall("same"),
      { type: "function_call_output", call_id: "same", output: "aborted" },
    ]);
  });
});

describe("forPrompt: orphan outputs (reference §4.3 step 2)", () => {
  it("normalize_removes_orphan_function_call_output", () => {
    expect(historyWith([functionOutput("orphan-1")]).forPrompt(TEXT_ONLY)).toEqual([]);
  });

  it("normalize_removes_orphan_custom_tool_call_output", () => {
    expect(historyWith([customOutput("orphan-2")]).forPrompt(TEXT_ONLY)).toEqual([]);
  });

  it("normalization_retains_local_shell_outputs", () => {
    const items = [localShellCall("shell-1"), functionOutput("shell-1", "hi")];
    expect(historyWith(items).forPrompt(TEXT_ONLY)).toEqual(items);
  });

  it("a custom tool output for a function call is an orphan", () => {
    const cm = historyWith([functionCall("c"), functionOutput("c"), customOutput("c")]);
    expect(cm.forPrompt(TEXT_ONLY)).toEqual([functionCall("c"), functionOutput("c")]);
  });

  it("normalize_mixed_inserts_and_removals", () => {
    const cm = historyWith([
      functionCall("c1"),
      functionOutput("orphan-f"),
      customCall("t1"),
      user("between"),
      customOutput("orphan-c"),
      localShellCall("s1"),
      functionCall("c2"),
      functionOutput("c2"),
    ]);
    expect(cm.forPrompt(TEXT_ONLY)).toEqual([
      functionCall("c1"),
      { type: "function_call_output", call_id: "c1", output: "aborted" },
      customCall("t1"),
      { type: "custom_tool_call_output", call_id: "t1", output: "aborted" },
      user("between"),
      localShellCall("s1"),
      { type: "function_call_output", call_id: "s1", output: "aborted" },
      functionCall("c2"),
      functionOutput("c2"),
    ]);
  });

  it("leaves unknown items out of the prompt", () => {
    const cm = new ContextManager({ items: [user("a"), { type: "other", original_type: "x" }] });
    expect(cm.forPrompt(TEXT_ONLY)).toEqual([user("a")]);
  });
});

describe("forPrompt: images (reference §4.3 step 3)", () => {
  const png = "data:image/png;base64,AAAA";
  const history: ResponseItem[] = [
    message("user", [{ type: "input_text", text: "look" }, image(png, "high")]),
    functionCall("c1"),
    functionOutput("c1", [{ type: "input_text", text: "shot" }, image(png)]),
    customCall("c2"),
    customOutput("c2", [image(png)]),
  ];

  it("replaces images in messages and tool outputs when the model has no image input", () => {
    expect(historyWith(history).forPrompt(TEXT_ONLY)).toEqual([
      message("user", [
        { type: "input_text", text: "look" },
        { type: "input_text", text: IMAGE_OMITTED },
      ]),
      functionCall("c1"),
      functionOutput("c1", [
        { type: "input_text", text: "shot" },
        { type: "input_text", text: IMAGE_OMITTED },
      ]),
      customCall("c2"),
      customOutput("c2", [{ type: "input_text", text: IMAGE_OMITTED }]),
    ]);
  });

  it("keeps images when the model accepts them", () => {
    expect(historyWith(history).forPrompt(WITH_IMAGES)).toEqual(history);
  });
});

describe("forPrompt: what it makes is made once per history item", () => {
  it("gives the same frozen synthetic outputs and text-only copies in every prompt of a history and its clones", () => {
    const cm = historyWith([
      message("user", [image("data:image/png;base64,AAAA")]),
      functionCall("c1", "fc_1"),
      customCall("c2"),
      localShellCall("c3"),
    ]);
    const first = cm.forPrompt(TEXT_ONLY);
    cm.recordItems([user("next")], DEFAULT_POLICY);
    const second = cm.clone().forPrompt(TEXT_ONLY);
    expect(second.slice(0, first.length)).toEqual(first);
    first.forEach((item, i) => {
      expect(second[i]).toBe(item);
      expect(Object.isFrozen(item)).toBe(true);
    });
  });

  it("makes them anew for items that are not frozen, which could have changed", () => {
    const call = functionCall("c1", "fc_1");
    const items: ResponseItem[] = [message("user", [image("data:image/png;base64,AAAA")]), call];
    const first = normalizeForPrompt([], items, TEXT_ONLY).toArray();
    call.call_id = "c9";
    const second = normalizeForPrompt([], items, TEXT_ONLY).toArray();
    expect(second[0]).not.toBe(first[0]);
    expect(second[2]).toEqual({
      type: "function_call_output",
      id: expect.stringMatching(/^fco_/),
      call_id: "c9",
      output: "aborted",
    });
  });
});

describe("forPrompt never changes history (design §10 invariant 4)", () => {
  it("leaves items, their objects and historyVersion as they were and returns a new array", () => {
    const cm = historyWith([
      message("user", [image("data:image/png;base64,AAAA")]),
      functionCall("c1", "fc_1"),
      functionOutput("orphan"),
    ]);
    const array = cm.items;
    const objects = [...cm.items];
    const before = snapshot(cm.items);
    const prompt = cm.forPrompt(TEXT_ONLY);
    expect(prompt).not.toBe(cm.items);
    expect(cm.items).toBe(array);
    expect(cm.items).toEqual(before);
    cm.items.forEach((item, i) => {
      expect(item).toBe(objects[i]);
    });
    expect(cm.historyVersion).toBe(0);
  });
});
