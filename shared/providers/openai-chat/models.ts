/**
 * The `chat` member of an `openai-chat` (or `workers-ai`) model entry: how the model's host lays
 * out a request (hosts and chat templates differ in the roles and fields they take).
 */
import * as z from "../../zod/index.ts";
import { readWireModels, type WireModels } from "../wire-models.ts";

export const ChatWireOptionsSchema = z.onFirstUse(() =>
  z.strictObject({
    /** The role of the leading instructions message: `system` is accepted by every host. */
    instructions_role: z._default(z.enum(["system", "developer"]), "system"),
    /**
     * The role of developer (and system) messages in the middle of history. Open-model chat
     * templates often reject `developer`, or a `system` message that is not first: `user` then.
     */
    developer_role: z._default(z.enum(["developer", "system", "user"]), "developer"),
    /** The assistant message field a host's reasoning text is replayed in; `none`: not replayed. */
    reasoning_field: z._default(z.enum(["reasoning", "reasoning_content", "none"]), "reasoning"),
    /** Reasoning models refuse `max_tokens`; some older hosts know only that one. */
    max_tokens_field: z._default(
      z.enum(["max_completion_tokens", "max_tokens"]),
      "max_completion_tokens",
    ),
    /** Whether tool messages may carry `image_url` parts (OpenAI's type allows text only). */
    tool_output_images: z._default(z.boolean(), false),
  }),
);
export type ChatWireOptions = z.output<typeof ChatWireOptionsSchema>;

let defaults: ChatWireOptions | undefined;

/** The options of a model whose entry sets none (built on first use, as every schema is). */
export function defaultChatWireOptions(): ChatWireOptions {
  defaults ??= Object.freeze(ChatWireOptionsSchema.parse({}));
  return defaults;
}

/** The entries of `variable` (`SPINDLE_OPENAI_CHAT_MODELS`, `SPINDLE_WORKERS_AI_MODELS`), split. */
export function readChatModels(
  json: string | undefined,
  variable: string,
): WireModels<ChatWireOptions> {
  return readWireModels(json, { variable, member: "chat", schema: ChatWireOptionsSchema });
}
