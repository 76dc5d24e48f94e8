import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import type { Env } from "../../env.ts";
import type { Jurisdiction } from "../../shared/api/index.ts";
import { digestsEqual } from "../common/digests.ts";
import { randomId } from "./random-ids.ts";

/**
 * Tags on the identifiers that address an object before anything is authenticated (design §18
 * invariant 20): a tenant key's id and a hook's URL. Workerd creates an object's storage as soon
 * as the object is addressed, so a forged key or hook URL must be refused before that: the worker
 * checks the tag, the HMAC-SHA256 under the deployment's `SPINDLE_ID_SECRET` of what the
 * identifier addresses (its kind, jurisdiction, tenant and id), and a wrong one is refused as an
 * unknown key or hook is. Only this service can make a tag, so an identifier that passes was made
 * by it for that tenant, whose object exists.
 *
 * A key id is `key_{16 random}{tag}`; a hook URL's last segment `{hook id}.{tag}`. A tag is the
 * first 128 bits of the MAC in lowercase hex (32 characters).
 */

/** The secret of a development worker (`SPINDLE_ENV=development`) that sets none. */
export const DEV_ID_SECRET = "spindle-development-id-secret";

/** The characters of an id's tag. */
export const TAG_CHARS = 32;
/** The random characters of a key id; an untagged key id has only these. */
const KEY_RANDOM_CHARS = 16;
const KEY_PREFIX = "key_";

type Kind = "key" | "hook";

export class IdTags {
  /** The keyed MAC with its pads computed once; each tag hashes a clone. */
  readonly #mac: ReturnType<typeof hmac.create>;
  readonly #acceptUntagged: boolean;

  constructor(secret: string, acceptUntagged: boolean) {
    this.#mac = hmac.create(sha256, utf8ToBytes(secret));
    this.#acceptUntagged = acceptUntagged;
  }

  /** A new key id of `tenant`. */
  newKeyId(jurisdiction: Jurisdiction, tenant: string): string {
    const random = randomId("key", KEY_RANDOM_CHARS).slice(KEY_PREFIX.length);
    return `${KEY_PREFIX}${random}${this.#tag("key", jurisdiction, tenant, random)}`;
  }

  /**
   * Whether a key id (`key_…`, as `parseApiKey` read it) was made for `tenant` here; an untagged
   * one only with `SPINDLE_ACCEPT_UNTAGGED_IDS=true`.
   */
  keyIdValid(jurisdiction: Jurisdiction, tenant: string, keyId: string): boolean {
    const body = keyId.slice(KEY_PREFIX.length);
    if (body.length === KEY_RANDOM_CHARS) return this.#acceptUntagged;
    if (body.length !== KEY_RANDOM_CHARS + TAG_CHARS) return false;
    const random = body.slice(0, KEY_RANDOM_CHARS);
    return this.#matches(
      this.#tag("key", jurisdiction, tenant, random),
      body.slice(KEY_RANDOM_CHARS),
    );
  }

  /** The tag of `tenant`'s hook `hookId`, for its URL. */
  hookTag(jurisdiction: Jurisdiction, tenant: string, hookId: string): string {
    return this.#tag("hook", jurisdiction, tenant, hookId);
  }

  /**
   * Whether `tag` is the hook's (null: a URL without one, valid only with
   * `SPINDLE_ACCEPT_UNTAGGED_IDS=true`).
   */
  hookTagValid(
    jurisdiction: Jurisdiction,
    tenant: string,
    hookId: string,
    tag: string | null,
  ): boolean {
    if (tag === null) return this.#acceptUntagged;
    return this.#matches(this.hookTag(jurisdiction, tenant, hookId), tag);
  }

  #tag(kind: Kind, jurisdiction: Jurisdiction, tenant: string, id: string): string {
    // `.` is outside every part's alphabet, so two different inputs never join the same way.
    const input = `${kind}.${jurisdiction ?? "g"}.${tenant}.${id}`;
    return bytesToHex(this.#mac.clone().update(utf8ToBytes(input)).digest()).slice(0, TAG_CHARS);
  }

  /** In constant time: how much of a presented tag is right must not show. */
  #matches(expected: string, presented: string): boolean {
    return digestsEqual(utf8ToBytes(expected), utf8ToBytes(presented));
  }
}

/** What the tags are made from. */
export type IdTagsEnv = Pick<
  Env,
  "SPINDLE_ENV" | "SPINDLE_ID_SECRET" | "SPINDLE_ACCEPT_UNTAGGED_IDS"
>;

let current: { secret: string; acceptUntagged: boolean; tags: IdTags } | undefined;

/**
 * The tags of this deployment, made once per value of its secret (and the one read of
 * `SPINDLE_ACCEPT_UNTAGGED_IDS`); undefined when no secret is set outside development.
 */
export function idTagsOf(env: IdTagsEnv): IdTags | undefined {
  const configured = env.SPINDLE_ID_SECRET?.trim() ? env.SPINDLE_ID_SECRET : undefined;
  const secret = configured ?? (env.SPINDLE_ENV === "development" ? DEV_ID_SECRET : undefined);
  if (secret === undefined) return undefined;
  // A `[vars]` entry may be the TOML boolean or the string.
  const acceptUntagged = String(env.SPINDLE_ACCEPT_UNTAGGED_IDS) === "true";
  if (current?.secret !== secret || current.acceptUntagged !== acceptUntagged) {
    current = { secret, acceptUntagged, tags: new IdTags(secret, acceptUntagged) };
  }
  return current.tags;
}
