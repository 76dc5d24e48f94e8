const ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/** `{prefix}_` and `length` random characters of [A-Za-z0-9]: a key, hook or endpoint id. */
export function randomId(prefix: string, length = 16): string {
  const bytes = crypto.getRandomValues(new Uint8Array(length));
  return `${prefix}_${[...bytes].map((b) => ALPHABET[b % ALPHABET.length]).join("")}`;
}
