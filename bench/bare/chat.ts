/**
 * The control for `bench:production`: the least a chat Durable Object does per turn on a
 * stateless HTTP provider. It keeps its messages in SQLite (one row each) and in memory (read once
 * per instance), sends all of them to the Responses endpoint at `STANDIN_URL` (SSE, `store:
 * false`), and stores the user message and the answer. No context engine, no rollout, no R2.
 */
import { DurableObject } from "cloudflare:workers";

export interface ChatEnv {
  /** The Responses API root of the benchmark's stand-in (requests go to `{root}/responses`). */
  STANDIN_URL?: string;
}

interface Message {
  role: "user" | "assistant";
  text: string;
}

/** The most messages one seed request may add, so a bad request cannot run unbounded. */
const MAX_SEED_TURNS = 20_000;

export class BareChat extends DurableObject<ChatEnv> {
  #messages: Message[] | undefined;

  constructor(ctx: DurableObjectState, env: ChatEnv) {
    super(ctx, env);
    ctx.storage.sql.exec(
      "CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, role TEXT NOT NULL, text TEXT NOT NULL)",
    );
  }

  #history(): Message[] {
    this.#messages ??= this.ctx.storage.sql
      .exec<{ role: Message["role"]; text: string }>("SELECT role, text FROM messages ORDER BY seq")
      .toArray()
      .map(({ role, text }) => ({ role, text }));
    return this.#messages;
  }

  #store(message: Message): void {
    this.ctx.storage.sql.exec(
      "INSERT INTO messages (role, text) VALUES (?, ?)",
      message.role,
      message.text,
    );
    this.#history().push(message);
  }

  /** One turn: the whole history plus `input` to the provider, then both messages stored. */
  async turn(input: string): Promise<{ messages: number }> {
    const root = this.env.STANDIN_URL;
    if (!root) throw new Error("STANDIN_URL is not set");
    const history = this.#history();
    const body = JSON.stringify({
      model: "bare",
      stream: true,
      store: false,
      input: [...history, { role: "user", text: input }].map((m) => ({
        type: "message",
        role: m.role,
        content: [{ type: m.role === "user" ? "input_text" : "output_text", text: m.text }],
      })),
    });
    const res = await fetch(`${root}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body,
    });
    const text = answerOf(await res.text());
    if (!res.ok || text === undefined) throw new Error(`stand-in answered ${res.status}`);
    this.#store({ role: "user", text: input });
    this.#store({ role: "assistant", text });
    return { messages: history.length };
  }

  /** Adds `turns` user/assistant pairs without calling the provider (seeding only). */
  seed(turns: number, user: string, assistant: string): { messages: number } {
    if (!Number.isInteger(turns) || turns < 1 || turns > MAX_SEED_TURNS) {
      throw new Error(`seed: turns must be 1..${MAX_SEED_TURNS}`);
    }
    for (let i = 0; i < turns; i++) {
      this.#store({ role: "user", text: user });
      this.#store({ role: "assistant", text: assistant });
    }
    return { messages: this.#history().length };
  }

  /** `ctx.storage.sql.databaseSize`: the database's pages, free ones included. */
  databaseSize(): number {
    return this.ctx.storage.sql.databaseSize;
  }
}

/** The text of the finished assistant message in a Responses SSE body, once it completed. */
function answerOf(sse: string): string | undefined {
  let text: string | undefined;
  let completed = false;
  for (const frame of sse.split("\n\n")) {
    const data = frame.split("\n").find((line) => line.startsWith("data: "));
    if (!data) continue;
    const event = JSON.parse(data.slice(6)) as {
      type: string;
      item?: { type: string; content?: { text?: string }[] };
    };
    if (event.type === "response.output_item.done" && event.item?.type === "message") {
      text = event.item.content?.map((part) => part.text ?? "").join("");
    }
    if (event.type === "response.completed") completed = true;
  }
  return completed ? text : undefined;
}
