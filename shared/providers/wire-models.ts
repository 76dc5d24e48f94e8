/**
 * A provider's configured models whose entries may carry one member of wire options (how its
 * host takes a request): `chat` in `SPINDLE_OPENAI_CHAT_MODELS` and `SPINDLE_WORKERS_AI_MODELS`,
 * `anthropic` in `SPINDLE_ANTHROPIC_MODELS`. The rest of an entry is the common `ConfiguredModel`
 * (`shared/models/configured.ts`).
 */
import { isPlainObject } from "../protocol/index.ts";
import type * as z from "../zod/index.ts";

export interface WireModels<O> {
  /** The entries without the member, as JSON (for `parseConfiguredModels`). */
  catalog: string | undefined;
  /** Each provider model's options (`model`, else `slug`, of its entry). */
  options: ReadonlyMap<string, O>;
}

export interface WireMember<O> {
  /** The variable the entries come from, for error messages. */
  variable: string;
  /** The member holding the options. */
  member: string;
  /** The options' schema; an entry without the member gets what it parses `{}` to. */
  schema: z.ZodMiniType<O>;
  /** The catalog's entry given the model's options (default: the entry without the member). */
  entryOf?: (entry: Record<string, unknown>, options: O) => Record<string, unknown>;
}

/**
 * Splits the configuration. What is not a JSON array of objects is passed on unchanged, for
 * `parseConfiguredModels` to reject with its own message; an invalid member throws here. Two
 * entries naming one provider model must agree on its options, since a client is made for the
 * provider model.
 */
export function readWireModels<O>(json: string | undefined, wire: WireMember<O>): WireModels<O> {
  // Every turn makes its client from the environment: a variable's JSON is read once per value.
  const last = lastRead.get(wire.variable);
  if (last !== undefined && last.json === json) return last.models as WireModels<O>;
  const models = splitEntries(json, wire);
  lastRead.set(wire.variable, { json, models });
  return models;
}

/** The newest value each variable was read at, and what it gave. */
const lastRead = new Map<string, { json: string | undefined; models: WireModels<unknown> }>();

function splitEntries<O>(json: string | undefined, wire: WireMember<O>): WireModels<O> {
  const options = new Map<string, O>();
  let entries: unknown;
  try {
    entries = JSON.parse(json ?? "");
  } catch {
    return { catalog: json, options };
  }
  if (!Array.isArray(entries) || !entries.every(isPlainObject)) return { catalog: json, options };
  const catalog = entries.map(({ [wire.member]: member, ...entry }) => {
    const name = entry.model ?? entry.slug;
    if (typeof name !== "string") return entry;
    const parsed = wire.schema.parse(member ?? {});
    const known = options.get(name);
    if (known !== undefined && JSON.stringify(known) !== JSON.stringify(parsed)) {
      throw new Error(`${wire.variable}: entries for model "${name}" differ in "${wire.member}"`);
    }
    options.set(name, parsed);
    return wire.entryOf ? wire.entryOf(entry, parsed) : entry;
  });
  return { catalog: JSON.stringify(catalog), options };
}
