/** The openai provider's stream as the Responses API frames it (SSE, `event:` = the type). */
export function responsesStream(
  events: readonly ({ type: string } & Record<string, unknown>)[],
): string {
  return events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
}

/** A streamed answer: one delta, the finished message `id`, then the usage. */
export function answerEvents(text: string, id = "msg_up") {
  return [
    { type: "response.output_text.delta", delta: text },
    {
      type: "response.output_item.done",
      item: { type: "message", id, role: "assistant", content: [{ type: "output_text", text }] },
    },
    {
      type: "response.completed",
      response: {
        usage: {
          input_tokens: 50,
          input_tokens_details: { cached_tokens: 20 },
          output_tokens: 3,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: 53,
        },
      },
    },
  ];
}

/** The JSON a stubbed `fetch` was sent, whatever body type carried it. */
export function requestJson<T = Record<string, unknown>>(
  init: RequestInit | undefined,
): Promise<T> {
  return new Response(init?.body ?? null).json() as Promise<T>;
}
