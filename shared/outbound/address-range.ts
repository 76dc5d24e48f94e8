import ipaddr from "ipaddr.js";

/**
 * Where an IP address literal leads: ipaddr.js's range of the address, or, for the IPv6 forms
 * that carry an IPv4 address a gateway or tunnel would deliver to, the range of that IPv4
 * address. Only `unicast` is public.
 */
export interface AddressRange {
  /** ipaddr.js's range name (`unicast`, `private`, `loopback`, …), or one of those below. */
  range: string;
  /** The IPv4 address the range is of, and how the IPv6 address carries it. */
  embedded?: { address: string; form: string };
}

type IPv6 = ipaddr.IPv6;

const NAT64 = ipaddr.IPv6.parseCIDR("64:ff9b::/96");
/** IPv4-compatible (RFC 4291 §2.5.5.1, deprecated): the low 32 bits of `::/96`. */
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR("::/96");
/** IANA allocates global unicast from 2000::/3 only; any other "unicast" is unassigned. */
const GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR("2000::/3");

/** The range of `host`, a URL's hostname, or undefined when it is a name, not an address. */
export function addressRange(host: string): AddressRange | undefined {
  if (host.startsWith("[") && host.endsWith("]")) {
    return ipv6Range(ipaddr.IPv6.parse(host.slice(1, -1)));
  }
  // The URL parser has already turned every IPv4 spelling (decimal, octal, hex, short) into
  // dotted quads; a hostname in any other form is a name.
  if (!ipaddr.IPv4.isValidFourPartDecimal(host)) return undefined;
  return { range: ipaddr.IPv4.parse(host).range() };
}

/** The IPv4 address in the 32 bits at `parts[at]` and `parts[at + 1]`, inverted with `mask`. */
function ipv4At(address: IPv6, at: number, mask = 0): ipaddr.IPv4 {
  const high = (address.parts[at] ?? 0) ^ mask;
  const low = (address.parts[at + 1] ?? 0) ^ mask;
  return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
}

function embedded(v4: ipaddr.IPv4, form: string): AddressRange {
  return { range: v4.range(), embedded: { address: v4.toString(), form } };
}

function ipv6Range(address: IPv6): AddressRange {
  const range = address.range();
  switch (range) {
    case "ipv4Mapped":
      return embedded(ipv4At(address, 6), "IPv4-mapped");
    case "rfc6145":
      return embedded(ipv4At(address, 6), "IPv4-translated");
    case "6to4":
      return embedded(ipv4At(address, 1), "6to4");
    case "teredo": {
      // RFC 4380: the server's address, and the client's inverted in the low 32 bits.
      const server = embedded(ipv4At(address, 2), "Teredo server");
      return server.range === "unicast"
        ? embedded(ipv4At(address, 6, 0xffff), "Teredo client")
        : server;
    }
    case "rfc6052":
      // 64:ff9b::/96 carries the address it translates to; 64:ff9b:1::/48 (RFC 8215) is for
      // local use, translating into a network's own space.
      return address.match(NAT64) ? embedded(ipv4At(address, 6), "NAT64") : { range: "localNat64" };
    case "unicast": {
      if (!address.match(IPV4_COMPATIBLE)) {
        return address.match(GLOBAL_UNICAST) ? { range } : { range: "unassigned" };
      }
      // Deprecated and routed nowhere: refused whatever it carries, named by what it carries.
      const carried = embedded(ipv4At(address, 6), "IPv4-compatible");
      return carried.range === "unicast" ? { range: "ipv4Compatible" } : carried;
    }
    default:
      return { range };
  }
}
