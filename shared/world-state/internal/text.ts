import { sha1 } from "@noble/hashes/legacy.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";

/** `sha1:<lowercase hex>` of the UTF-8 text: the fingerprint format persisted in snapshots. */
export function fingerprint(text: string): string {
  return `sha1:${bytesToHex(sha1(utf8ToBytes(text)))}`;
}

/** True when the text has something besides whitespace. */
export function hasText(text: string | undefined): text is string {
  return text !== undefined && text.trim() !== "";
}

/** Escapes XML text and attribute values (all five predefined entities). */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => XML_ENTITIES[ch] ?? ch);
}

const XML_ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};
