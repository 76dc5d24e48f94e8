/**
 * Domain names that public DNS never answers, or answers only for a local network: a request to
 * one reaches the sender's own machine or network, if anything. Each suffix with why.
 */
const SPECIAL_USE: ReadonlyMap<string, string> = new Map([
  ["localhost", "a loopback name (RFC 6761)"],
  ["local", "multicast DNS on the local link (RFC 6762)"],
  ["internal", "reserved for private networks (ICANN)"],
  ["home.arpa", "reserved for home networks (RFC 8375)"],
  ["arpa", "the infrastructure domain (RFC 3172)"],
  ["test", "reserved for testing (RFC 6761)"],
  ["invalid", "reserved as never valid (RFC 6761)"],
  ["example", "reserved for documentation (RFC 6761)"],
  ["onion", "a Tor service (RFC 7686)"],
  ["localdomain", "a local resolver's own domain"],
  // RFC 6762 appendix G: names seen in private use, never delegated.
  ["intranet", "used on private networks (RFC 6762)"],
  ["private", "used on private networks (RFC 6762)"],
  ["corp", "used on private networks (RFC 6762)"],
  ["home", "used on private networks (RFC 6762)"],
  ["lan", "used on private networks (RFC 6762)"],
]);

/** The most labels a suffix above has. */
const LONGEST = Math.max(...[...SPECIAL_USE.keys()].map((suffix) => suffix.split(".").length));

/** The special-use suffix `labels` (a name's labels, lowercase) end with, and why; or undefined. */
export function specialUseSuffix(
  labels: readonly string[],
): { suffix: string; why: string } | undefined {
  // The longest suffix first: `home.arpa` is named for itself, not as `.arpa`.
  for (let n = Math.min(LONGEST, labels.length); n >= 1; n--) {
    const suffix = labels.slice(-n).join(".");
    const why = SPECIAL_USE.get(suffix);
    if (why !== undefined) return { suffix, why };
  }
  return undefined;
}
