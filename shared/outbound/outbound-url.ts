import { type AddressRange, addressRange } from "./address-range.ts";
import { specialUseSuffix } from "./special-use-names.ts";

/** Why a URL may not be sent to. */
export type OutboundUrlReason =
  /** Not an absolute URL, or a host no request can be made to. */
  | "invalid_url"
  /** Not `https` (in development, `http` to a loopback host is allowed too). */
  | "scheme"
  /** `user:password@` in the URL: it would be sent, and logged. */
  | "credentials"
  /** A name public DNS does not answer (`localhost`, `.internal`, `.local`, …). */
  | "special_use_name"
  /** A name of one label, which only a local resolver (a search domain) answers. */
  | "single_label_name"
  /** An IP address that is not public unicast, or that carries one that is not. */
  | "non_public_address";

export interface OutboundUrlRefusal {
  reason: OutboundUrlReason;
  /** Why, in words safe to show the tenant who gave the URL. */
  detail: string;
}

export interface OutboundUrlPolicy {
  /** Development: `http` or `https` to `localhost`, `*.localhost`, 127.0.0.0/8 or `[::1]`. */
  allowLoopback: boolean;
}

/** A deployment's policy (its `SPINDLE_ENV`): development also allows loopback (a local receiver). */
export function outboundPolicyOf(spindleEnv: string | undefined): OutboundUrlPolicy {
  return { allowLoopback: spindleEnv === "development" };
}

/**
 * Why a request to `url` is refused, or undefined: it is `https`, without credentials, to a
 * public name or a public unicast address (after unwrapping an IPv4 address an IPv6 one
 * carries). The check is of the URL as `fetch` parses it (WHATWG), so every spelling of an
 * address is seen as the address it is; what a public name resolves to is not seen.
 */
export function outboundUrlRefusal(
  url: string,
  policy: OutboundUrlPolicy,
): OutboundUrlRefusal | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { reason: "invalid_url", detail: "not an absolute URL" };
  }
  if (parsed.username !== "" || parsed.password !== "") {
    return { reason: "credentials", detail: "credentials in the URL (user:password@)" };
  }
  const host = parsed.hostname;
  const web = parsed.protocol === "https:" || parsed.protocol === "http:";
  const address = web ? addressRange(host) : undefined;
  const labels = (host.endsWith(".") ? host.slice(0, -1) : host).split(".");
  const loopback = address
    ? address.range === "loopback" && !address.embedded
    : isLoopbackName(labels);
  if (policy.allowLoopback && loopback && web) return undefined;
  if (parsed.protocol !== "https:") {
    const also = policy.allowLoopback ? " (http only to a loopback host)" : "";
    return {
      reason: "scheme",
      detail: `the scheme is ${parsed.protocol}, and an outbound URL is https${also}`,
    };
  }
  return address ? addressRefusal(host, address) : nameRefusal(host, labels);
}

function isLoopbackName(labels: readonly string[]): boolean {
  return specialUseSuffix(labels)?.suffix === "localhost";
}

function nameRefusal(host: string, labels: readonly string[]): OutboundUrlRefusal | undefined {
  const special = specialUseSuffix(labels);
  if (special) {
    return {
      reason: "special_use_name",
      detail: `${host} is under .${special.suffix}, ${special.why}`,
    };
  }
  if (labels.includes("")) return { reason: "invalid_url", detail: `${host} has an empty label` };
  if (labels.length === 1) {
    return {
      reason: "single_label_name",
      detail: `${host} is a single-label name: only a local resolver answers it`,
    };
  }
  return undefined;
}

/** ipaddr.js's range names, and those of `address-range.ts`, in words. */
const RANGE_WORDS: Readonly<Record<string, string>> = {
  unspecified: "the unspecified address",
  broadcast: "the broadcast address",
  multicast: "a multicast address",
  linkLocal: "a link-local address",
  loopback: "a loopback address",
  carrierGradeNat: "a shared (carrier-grade NAT) address",
  private: "a private address",
  reserved: "a reserved or documentation address",
  benchmarking: "a benchmarking address",
  uniqueLocal: "a unique-local address",
  deprecatedSiteLocal: "a site-local address",
  discard: "a discard-only address",
  localNat64: "a local-use NAT64 address (RFC 8215)",
  ipv4Compatible: "an IPv4-compatible address (deprecated, RFC 4291)",
  unassigned: "an address outside 2000::/3, the global unicast space",
};

function addressRefusal(host: string, address: AddressRange): OutboundUrlRefusal | undefined {
  if (address.range === "unicast") return undefined;
  const words = RANGE_WORDS[address.range] ?? `a special-purpose address (${address.range})`;
  const what = address.embedded
    ? `${host} embeds ${address.embedded.address} (${address.embedded.form}), ${words}`
    : `${host} is ${words}`;
  return { reason: "non_public_address", detail: `${what}, not a public one` };
}
