/**
 * `SPINDLE_OPENAI_CHAT_MODELS`: the configured models of `openai-chat`, whose entries may carry a
 * `chat` member saying how the model's host lays out a request (hosts and chat
 * templates differ in the roles and fields they take). The rest of an entry is the common
 * `ConfiguredModel` (`shared/models/configured.ts`).
 */
import * as z from "../../zod/index.ts";

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

interface ChatModels {
  /** The entries without their `chat` member, as JSON (for `parseConfiguredModels`). */
  catalog: string | undefined;
  /** Each provider model's options (`model`, else `slug`, of its entry). */
  options: ReadonlyMap<string, ChatWireOptions>;
}

/**
 * Splits the configuration. What is not a JSON array of objects is passed on unchanged, for
 * `parseConfiguredModels` to reject with its own message; an invalid `chat` member throws here.
 * Two entries naming one provider model must agree on its options, since a client is made for
 * the provider model.
 */
export function readChatModels(json: string | undefined): ChatModels {
  const options = new Map<string, ChatWireOptions>();
  let entries: unknown;
  try {
    entries = JSON.parse(json ?? "");
  } catch {
    return { catalog: json, options };
  }
  if (!Array.isArray(entries) || !entries.every(isRecord)) return { catalog: json, options };
  const catalog = entries.map(({ chat, ...entry }) => {
    const name = entry.model ?? entry.slug;
    if (typeof name !== "string") return entry;
    const parsed = ChatWireOptionsSchema.parse(chat ?? {});
    const known = options.get(name);
    if (known && JSON.stringify(known) !== JSON.stringify(parsed)) {
      throw new Error(`SPINDLE_OPENAI_CHAT_MODELS: entries for model "${name}" differ in "chat"`);
    }
    options.set(name, parsed);
    return entry;
  });
  return { catalog: JSON.stringify(catalog), options };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
