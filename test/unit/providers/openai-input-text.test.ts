import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ContextManager,
  type InputModality,
  PromptInput,
  SealedItems,
  summarizeRun,
} from "../../../shared/context-manager/index.ts";
import {
  type KnownResponseItem,
  modelVisibleItem,
  type ResponseItem,
} from "../../../shared/protocol/index.ts";
import { InputSerializer, type ModelPrompt } from "../../../shared/providers/index.ts";
import { buildRequestBody, requestBodyBytes } from "../../../shared/providers/openai/wire.ts";
import { historyArb, modalitiesArb } from "../context-manager/arbitraries.ts";
import {
  assistant,
  DEFAULT_POLICY,
  functionCall,
  functionOutput,
  image,
  message,
  user,
} from "../context-manager/builders.ts";

/**
 * The body's text. Strict: invalid UTF-8 throws, so equal text means bytes equal to the expected
 * text's UTF-8.
 */
const sent = (body: Uint8Array) =>
  new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(body);

/** What the provider sent before it kept any text: every item mapped and serialized. */
const plainInput = (items: readonly KnownResponseItem[]) =>
  JSON.stringify(items.map(modelVisibleItem));

/** A turn's items as a session records them: ids and the turn-id passthrough included. */
function turnItems(n: number): ResponseItem[] {
  const passthrough = { internal_chat_message_metadata_passthrough: { turn_id: `turn-${n}` } };
  return [
    { ...user(`question ${n} "quoted" \u00e9\u2713`), id: `msg-u${n}`, ...passthrough },
    { ...assistant(`answer ${n}`), id: `msg-a${n}`, ...passthrough },
  ];
}

function prompt(input: PromptInput, extra: Partial<ModelPrompt> = {}): ModelPrompt {
  return {
    instructions: 'Be brief. "Always" quote \\ escapes.\n',
    input,
    tools: [
      {
        type: "function",
        name: "lookup",
        description: "Looks things up",
        parameters: { type: "object", properties: {} },
      },
    ],
    parallel_tool_calls: true,
    ...extra,
  };
}

/** A stored run as a checkpoint holds it: JSON text read and frozen on first use. */
function storedRun(items: ResponseItem[]): SealedItems {
  const text = JSON.stringify({ items });
  return new SealedItems(items.length, () => JSON.parse(text), summarizeRun(items));
}

describe("InputSerializer", () => {
  it("writes the same text as serializing every item, as a thread's history grows", () => {
    for (const chunkItems of [1, 3, 256]) {
      const history = new ContextManager();
      const serializer = new InputSerializer(chunkItems);
      for (let n = 0; n < 140; n++) {
        history.recordItems(turnItems(n), DEFAULT_POLICY);
        const items = history.forPrompt(["text"]);
        // Heads of changing lengths: what is reused is found in the previous body wherever its
        // items begin.
        const head = `{"model":"${"m".repeat(n % 4)}","input":`;
        expect(sent(serializer.write(head, items, "}"))).toBe(`${head}${plainInput(items)}}`);
      }
    }
  });

  it("writes the same text after history is rewritten, rolled back, or emptied", () => {
    const history = new ContextManager();
    history.recordItems([...turnItems(0), ...turnItems(1), ...turnItems(2)], DEFAULT_POLICY);
    const serializer = new InputSerializer(2);
    const prompts: KnownResponseItem[][] = [history.forPrompt(["text"])];
    history.dropLastNUserTurns(1);
    prompts.push(history.forPrompt(["text"]));
    history.replace([user("summary of the thread"), ...turnItems(3)]);
    prompts.push(history.forPrompt(["text"]));
    history.replace([]);
    prompts.push(history.forPrompt(["text"]));
    for (const items of prompts)
      expect(sent(serializer.write("", items, ""))).toBe(plainInput(items));
  });

  it("serializes an item already sent once only, while its chunk stays the same", () => {
    let serialized = 0;
    const counted = Object.freeze({
      ...user("counted"),
      toJSON() {
        serialized += 1;
        return user("counted");
      },
    }) as unknown as KnownResponseItem;
    const a = Object.freeze(assistant("a")) as KnownResponseItem;
    const b = Object.freeze(assistant("b")) as KnownResponseItem;
    // The text expected, made without calling `toJSON`.
    const expected = (items: KnownResponseItem[]) =>
      JSON.stringify(items.map((item) => (item === counted ? user("counted") : item)));
    const serializer = new InputSerializer(2);
    for (const items of [
      [counted, a],
      [counted, a, b],
      [counted, a, b, a],
      [counted, a, b, a],
    ]) {
      expect(sent(serializer.write("", items, ""))).toBe(expected(items));
    }
    expect(serialized).toBe(1);
    // Its chunk changed (another item in it): it is serialized again.
    const changed = [counted, b, b];
    expect(sent(serializer.write("", changed, ""))).toBe(expected(changed));
    expect(serialized).toBe(2);
  });

  it("serializes an unfrozen item again on every call, so a change to it is sent", () => {
    const frozen = Object.freeze(user("kept")) as KnownResponseItem;
    const changing = user("before");
    const serializer = new InputSerializer(1);
    serializer.write("", [frozen, changing, frozen], "");
    (changing.content[0] as { text: string }).text = "after";
    const items = [frozen, changing, frozen];
    expect(sent(serializer.write("", items, ""))).toBe(plainInput(items));
  });

  it("writes the same text for any history, on either modality, prompt after prompt", () => {
    fc.assert(
      fc.property(
        historyArb,
        modalitiesArb,
        fc.integer({ min: 1, max: 4 }),
        (items, modalities: InputModality[], chunkItems) => {
          const history = new ContextManager();
          const serializer = new InputSerializer(chunkItems);
          for (const item of items) {
            history.recordItems([item], DEFAULT_POLICY);
            const input = history.forPrompt(modalities);
            expect(sent(serializer.write("", input, ""))).toBe(plainInput(input));
          }
        },
      ),
    );
  });

  it("refuses a chunk size that is not a positive integer", () => {
    expect(() => new InputSerializer(0)).toThrow(RangeError);
    expect(() => new InputSerializer(1.5)).toThrow(RangeError);
  });
});

describe("the openai request body", () => {
  const options = { model: "gpt-test", promptCacheKey: "thr_1" };
  const plainBody = (p: ModelPrompt) => JSON.stringify(buildRequestBody(p, options));

  it("is JSON.stringify of the request, with synthetic outputs and text-only images", () => {
    const history = new ContextManager();
    history.recordItems(
      [
        message("user", [{ type: "input_text", text: "look" }, image("data:image/png;base64,AA")]),
        functionCall("call-1", "fc-1"),
        user("and then?"),
        functionCall("call-2"),
        functionOutput("call-2", [image("data:image/png;base64,BB")]),
        functionOutput("orphan"),
      ],
      DEFAULT_POLICY,
    );
    const serializer = new InputSerializer(1);
    for (const modalities of [["text"], ["text"], ["text", "image"]] as InputModality[][]) {
      const p = prompt(history.promptInput(modalities), {
        reasoning: { effort: "low", summary: "auto" },
        text: { verbosity: "low" },
      });
      expect(sent(requestBodyBytes(p, options, serializer))).toBe(plainBody(p));
    }
    const body = requestBodyBytes(prompt(history.promptInput(["text"])), options, serializer);
    // The placeholder and the synthetic output are in what is sent.
    expect(JSON.parse(sent(body)).input).toEqual([
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "look" },
          {
            type: "input_text",
            text: "image content omitted because you do not support image input",
          },
        ],
      },
      expect.objectContaining({ type: "function_call", call_id: "call-1" }),
      expect.objectContaining({
        type: "function_call_output",
        call_id: "call-1",
        output: "aborted",
      }),
      user("and then?"),
      expect.objectContaining({ type: "function_call", call_id: "call-2" }),
      {
        type: "function_call_output",
        call_id: "call-2",
        output: [
          {
            type: "input_text",
            text: "image content omitted because you do not support image input",
          },
        ],
      },
    ]);
  });

  it("is JSON.stringify of the request for a history restored from stored runs, turn after turn", () => {
    const runs = [storedRun([...turnItems(0), ...turnItems(1)]), storedRun(turnItems(2))];
    const history = new ContextManager({ sealed: runs, items: turnItems(3), historyVersion: 1 });
    const serializer = new InputSerializer(3);
    for (let n = 4; n < 7; n++) {
      const p = prompt(history.promptInput(["text"]));
      expect(sent(requestBodyBytes(p, options, serializer))).toBe(plainBody(p));
      history.recordItems(turnItems(n), DEFAULT_POLICY);
    }
  });

  it("is JSON.stringify of the request for a compaction prompt, whose last message is new each time", () => {
    const history = new ContextManager();
    history.recordItems(turnItems(0), DEFAULT_POLICY);
    const serializer = new InputSerializer(1);
    for (const ask of ["summarize", "summarize again"]) {
      const p = prompt(history.promptInput(["text"]).concat([user(ask)]), { tools: [] });
      expect(sent(requestBodyBytes(p, { model: "gpt-test" }, serializer))).toBe(
        JSON.stringify(buildRequestBody(p, { model: "gpt-test" })),
      );
    }
  });

  it("is JSON.stringify of the request for an empty input", () => {
    const p = prompt(PromptInput.of([]));
    expect(sent(requestBodyBytes(p, options, new InputSerializer()))).toBe(plainBody(p));
  });
});
