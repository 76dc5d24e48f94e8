import type { ThreadEvent, TurnResource } from "../api/index.ts";
import type { ResponseItem } from "../protocol/index.ts";
import type { ResponseRef } from "./ids.ts";
import { isClientVisible, serverToolOf } from "./items.ts";
import type { OpenAIItem, OpenAIResponse } from "./resources.ts";
import { openAIItem, outputItems, type ResponseSettings, responseResource } from "./response.ts";

/** One streamed Responses event (design §17): its `type`, `sequence_number` and fields. */
export type OpenAIStreamEvent = { type: string; sequence_number: number } & Record<string, unknown>;

/** What the stream needs to know that the thread's events do not say. */
export interface ResponseStreamOptions {
  settings: ResponseSettings;
  /** Known up front for a resume; a new turn's comes with its `turn.started`. */
  ref?: ResponseRef;
  /** A resume's: the turn's items before it (server calls answered in this stretch). */
  earlier?: readonly ResponseItem[];
  /** The stretch of a new turn: its thread, where it starts and how many client items it sent. */
  pending?: Omit<ResponseRef, "turnId">;
  nowMs: () => number;
}

interface OpenMessage {
  id: string;
  outputIndex: number;
  text: string;
}

/**
 * Turns a thread's events for one turn into Responses events, in OpenAI's order, each with a
 * strictly increasing `sequence_number`: `response.created` and `.in_progress` when the turn
 * starts, then per output item `output_item.added`, its parts and deltas, `output_item.done`,
 * and last `response.completed` (or `.failed`, `.incomplete`). Events of another turn (an
 * automatic compaction before it) and context items are not shown.
 */
export class ResponseStream {
  readonly #options: ResponseStreamOptions;
  #ref: ResponseRef | undefined;
  #sequence = 0;
  #seenInputs = 0;
  #nextOutput = 0;
  #message: OpenMessage | undefined;
  /** Server calls, shown as one `mcp_call` once their output comes. */
  readonly #serverCalls = new Map<string, ResponseItem>();
  #ended = false;

  constructor(options: ResponseStreamOptions) {
    this.#options = options;
    this.#ref = options.ref;
    for (const item of options.earlier ?? []) {
      if (item.type === "function_call" && serverToolOf(item.name)) {
        this.#serverCalls.set(item.call_id, item);
      }
    }
  }

  /** The response this stream is about, once known. */
  get ref(): ResponseRef | undefined {
    return this.#ref;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** The opening events of a stream whose response is known before any event (a resume). */
  open(): OpenAIStreamEvent[] {
    return this.#ref ? this.#opening(this.#skeleton()) : [];
  }

  /** The Responses events one thread event makes (often none). */
  push(event: ThreadEvent): OpenAIStreamEvent[] {
    if (this.#ended) return [];
    if (event.type === "turn.started") {
      if (this.#ref || event.data.kind !== "turn" || !this.#options.pending) return [];
      this.#ref = { ...this.#options.pending, turnId: event.turn_id };
      return this.#opening(this.#skeleton());
    }
    if (!this.#ref || event.turn_id !== this.#ref.turnId) return [];
    switch (event.type) {
      case "item.delta":
        return this.#delta(event.data.item_id, event.data.delta);
      case "item.completed":
        return event.data.context ? [] : this.#item(event.data.item);
      case "turn.completed":
      case "turn.requires_action":
      case "turn.interrupted":
      case "turn.failed":
        return this.#end(event.data);
      default:
        return [];
    }
  }

  /** The stream broke off: the response as failed, with what it had (none before it began). */
  fail(code: string, message: string): OpenAIStreamEvent[] {
    if (this.#ended || !this.#ref) return [];
    this.#ended = true;
    const response = {
      ...this.#skeleton(),
      status: "failed" as const,
      error: { code, message },
    };
    return [this.#event("response.failed", { response })];
  }

  #event(type: string, fields: Record<string, unknown>): OpenAIStreamEvent {
    return { type, sequence_number: this.#sequence++, ...fields };
  }

  #skeleton(): OpenAIResponse {
    const ref = this.#ref as ResponseRef;
    const turn: TurnResource = {
      object: "turn",
      id: ref.turnId,
      thread_id: ref.threadId,
      kind: "turn",
      status: "in_progress",
      items: [],
      pending_calls: [],
      usage: null,
      error: null,
    };
    return responseResource(turn, ref, this.#options.settings, this.#options.nowMs());
  }

  #opening(response: OpenAIResponse): OpenAIStreamEvent[] {
    return [
      this.#event("response.created", { response }),
      this.#event("response.in_progress", { response }),
    ];
  }

  #delta(itemId: string, delta: string): OpenAIStreamEvent[] {
    const events: OpenAIStreamEvent[] = [];
    if (this.#message?.id !== itemId) {
      events.push(...this.#closeMessage());
      events.push(...this.#openMessage(itemId));
    }
    const message = this.#message as OpenMessage;
    message.text += delta;
    events.push(
      this.#event("response.output_text.delta", {
        item_id: itemId,
        output_index: message.outputIndex,
        content_index: 0,
        delta,
        logprobs: [],
      }),
    );
    return events;
  }

  #openMessage(id: string): OpenAIStreamEvent[] {
    const outputIndex = this.#nextOutput++;
    this.#message = { id, outputIndex, text: "" };
    return [
      this.#event("response.output_item.added", {
        output_index: outputIndex,
        item: { type: "message", id, status: "in_progress", role: "assistant", content: [] },
      }),
      this.#event("response.content_part.added", {
        item_id: id,
        output_index: outputIndex,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [], logprobs: [] },
      }),
    ];
  }

  /** Ends the streaming message with the text it has (the item's own text when it is done). */
  #closeMessage(done?: OpenAIItem): OpenAIStreamEvent[] {
    const message = this.#message;
    if (!message) return [];
    this.#message = undefined;
    const text =
      done?.type === "message"
        ? done.content.map((part) => (typeof part.text === "string" ? part.text : "")).join("")
        : message.text;
    const part = { type: "output_text", text, annotations: [], logprobs: [] };
    const item = done ?? {
      type: "message",
      id: message.id,
      status: "incomplete",
      role: "assistant",
      content: [part],
    };
    const at = { item_id: message.id, output_index: message.outputIndex, content_index: 0 };
    return [
      this.#event("response.output_text.done", { ...at, text, logprobs: [] }),
      this.#event("response.content_part.done", { ...at, part }),
      this.#event("response.output_item.done", { output_index: message.outputIndex, item }),
    ];
  }

  #item(item: ResponseItem): OpenAIStreamEvent[] {
    if (!isClientVisible(item)) return [];
    const ref = this.#ref as ResponseRef;
    if (this.#seenInputs < ref.inputs) {
      this.#seenInputs += 1;
      return [];
    }
    if (item.type === "function_call_output") return this.#serverResult(item);
    const mapped = openAIItem(item, `item_${ref.turnId}_${this.#nextOutput}`);
    if (!mapped) return [];
    if (mapped.type === "message" && this.#message?.id === mapped.id) {
      return this.#closeMessage(mapped);
    }
    const events = this.#closeMessage();
    if (mapped.type === "message" && mapped.role === "assistant") {
      // A message that was not streamed: its text arrives as one delta.
      const text = mapped.content.map((p) => (typeof p.text === "string" ? p.text : "")).join("");
      events.push(...this.#openMessage(mapped.id));
      (this.#message as OpenMessage).text = text;
      events.push(
        this.#event("response.output_text.delta", {
          item_id: mapped.id,
          output_index: (this.#message as OpenMessage).outputIndex,
          content_index: 0,
          delta: text,
          logprobs: [],
        }),
      );
      return [...events, ...this.#closeMessage(mapped)];
    }
    if (mapped.type === "mcp_call" && item.type === "function_call") {
      this.#serverCalls.set(item.call_id, item);
      return events;
    }
    const outputIndex = this.#nextOutput++;
    if (mapped.type === "function_call") {
      const at = { item_id: mapped.id, output_index: outputIndex };
      events.push(
        this.#event("response.output_item.added", {
          output_index: outputIndex,
          item: { ...mapped, arguments: "", status: "in_progress" },
        }),
        this.#event("response.function_call_arguments.delta", { ...at, delta: mapped.arguments }),
        this.#event("response.function_call_arguments.done", {
          ...at,
          name: mapped.name,
          arguments: mapped.arguments,
        }),
        this.#event("response.output_item.done", { output_index: outputIndex, item: mapped }),
      );
      return events;
    }
    events.push(
      this.#event("response.output_item.added", { output_index: outputIndex, item: mapped }),
      this.#event("response.output_item.done", { output_index: outputIndex, item: mapped }),
    );
    return events;
  }

  /** A server call's output: the call shows, as one finished `mcp_call` item. */
  #serverResult(item: ResponseItem & { type: "function_call_output" }): OpenAIStreamEvent[] {
    const call = this.#serverCalls.get(item.call_id);
    if (!call) return [];
    this.#serverCalls.delete(item.call_id);
    const [done] = outputItems([item], `item_${item.call_id}`, [], [call]);
    if (!done) return [];
    const outputIndex = this.#nextOutput++;
    return [
      ...this.#closeMessage(),
      this.#event("response.output_item.added", {
        output_index: outputIndex,
        item: { ...done, status: "in_progress", output: null },
      }),
      this.#event("response.output_item.done", { output_index: outputIndex, item: done }),
    ];
  }

  #end(turn: TurnResource): OpenAIStreamEvent[] {
    this.#ended = true;
    const events = this.#closeMessage();
    const ref = this.#ref as ResponseRef;
    const response = responseResource(turn, ref, this.#options.settings, this.#options.nowMs());
    for (const approval of response.output.filter((i) => i.type === "mcp_approval_request")) {
      const outputIndex = this.#nextOutput++;
      events.push(
        this.#event("response.output_item.added", { output_index: outputIndex, item: approval }),
        this.#event("response.output_item.done", { output_index: outputIndex, item: approval }),
      );
    }
    const type =
      response.status === "failed"
        ? "response.failed"
        : response.status === "completed"
          ? "response.completed"
          : "response.incomplete";
    events.push(this.#event(type, { response }));
    return events;
  }
}
