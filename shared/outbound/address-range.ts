/**
 * Where an IP address literal leads: its special-use range, named as ipaddr.js 2.5 names them
 * (the tests hold the two equal), or, for the IPv6 forms that carry an IPv4 address a gateway or
 * tunnel would deliver to, the range of that IPv4 address. Only `unicast` is public.
 */
export interface AddressRange {
  /** The range's name (`unicast`, `private`, `loopback`, …), or one of those below. */
  range: string;
  /** The IPv4 address the range is of, and how the IPv6 address carries it. */
  embedded?: { address: string; form: string };
}

/** An address as its 16-bit parts, most significant first: two for IPv4, eight for IPv6. */
type Parts = readonly number[];
type Subnet = readonly [parts: Parts, bits: number];

/**
 * The special-use ranges, each with its subnets, in the order ipaddr.js tries them (the first
 * that holds the address names it; any other address is `unicast`).
 */
const IPV4_RANGES: readonly (readonly [string, readonly string[]])[] = [
  ["unspecified", ["0.0.0.0/8"]],
  ["broadcast", ["255.255.255.255/32"]],
  ["multicast", ["224.0.0.0/4"]], // RFC 3171
  ["linkLocal", ["169.254.0.0/16"]], // RFC 3927
  ["loopback", ["127.0.0.0/8"]], // RFC 5735
  ["carrierGradeNat", ["100.64.0.0/10"]], // RFC 6598
  ["private", ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]], // RFC 1918
  [
    "reserved", // RFCs 5735, 5737, 2544, 1700
    [
      "192.0.0.0/24",
      "192.0.2.0/24",
      "192.88.99.0/24",
      "198.18.0.0/15",
      "198.51.100.0/24",
      "203.0.113.0/24",
      "240.0.0.0/4",
    ],
  ],
  ["as112", ["192.175.48.0/24", "192.31.196.0/24"]], // RFCs 7534, 7535
  ["amt", ["192.52.193.0/24"]], // RFC 7450
];

const IPV6_RANGES: readonly (readonly [string, readonly string[]])[] = [
  ["unspecified", ["::/128"]], // RFC 4291, here and after
  ["linkLocal", ["fe80::/10"]],
  ["multicast", ["ff00::/8"]],
  ["loopback", ["::1/128"]],
  ["uniqueLocal", ["fc00::/7"]],
  ["ipv4Mapped", ["::ffff:0:0/96"]],
  ["deprecatedSiteLocal", ["fec0::/10"]], // RFC 3879
  ["discard", ["100::/64"]], // RFC 6666
  ["rfc6145", ["::ffff:0:0:0/96"]],
  ["rfc6052", ["64:ff9b::/96", "64:ff9b:1::/48"]], // RFCs 6052, 8215
  ["6to4", ["2002::/16"]], // RFC 3056
  ["teredo", ["2001::/32"]], // RFCs 6052, 6146
  ["benchmarking", ["2001:2::/48"]], // RFC 5180
  ["amt", ["2001:3::/32"]], // RFC 7450
  ["as112v6", ["2001:4:112::/48", "2620:4f:8000::/48"]], // RFCs 7535, 7534
  ["deprecatedOrchid", ["2001:10::/28"]], // RFC 4843
  ["orchid2", ["2001:20::/28"]], // RFC 7343
  ["droneRemoteIdProtocolEntityTags", ["2001:30::/28"]], // RFC 9374
  ["segmentRouting", ["5f00::/16"]], // RFC 9602
  ["reserved", ["2001::/23", "2001:db8::/32", "3fff::/20"]], // RFCs 3849, 2928, 9637
];

/** A dotted quad without leading zeros (what the URL parser writes), as two 16-bit parts. */
function ipv4Parts(text: string): Parts | undefined {
  if (!/^(0|[1-9]\d{0,2})(\.(0|[1-9]\d{0,2})){3}$/.test(text)) return undefined;
  const octets = text.split(".").map(Number);
  if (octets.some((octet) => octet > 255)) return undefined;
  const [a = 0, b = 0, c = 0, d = 0] = octets;
  return [(a << 8) | b, (c << 8) | d];
}

/** Eight 16-bit parts of an IPv6 address (`::` shortening and a dotted IPv4 tail allowed). */
function ipv6Parts(text: string): Parts {
  const halves = text.split("::");
  if (halves.length > 2) throw new Error(`not an IPv6 address: ${text}`);
  const groups = (half: string | undefined): number[] => {
    if (half === undefined || half === "") return [];
    return half.split(":").flatMap((group) => {
      if (group.includes(".")) {
        const v4 = ipv4Parts(group);
        if (v4 === undefined) throw new Error(`not an IPv6 address: ${text}`);
        return [...v4];
      }
      if (!/^[0-9a-f]{1,4}$/i.test(group)) throw new Error(`not an IPv6 address: ${text}`);
      return [Number.parseInt(group, 16)];
    });
  };
  const head = groups(halves[0]);
  const tail = groups(halves[1]);
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) {
    throw new Error(`not an IPv6 address: ${text}`);
  }
  return [...head, ...Array<number>(missing).fill(0), ...tail];
}

function subnet(cidr: string, parse: (address: string) => Parts | undefined): Subnet {
  const [address = "", bits = ""] = cidr.split("/");
  const parts = parse(address);
  if (parts === undefined) throw new Error(`bad subnet ${cidr}`);
  return [parts, Number(bits)];
}

/** Whether the first `bits` bits of `parts` are those of the subnet's address. */
function inSubnet(parts: Parts, [base, bits]: Subnet): boolean {
  for (let i = 0, left = bits; left > 0; i++, left -= 16) {
    const mask = left >= 16 ? 0xffff : (0xffff << (16 - left)) & 0xffff;
    if (((parts[i] ?? 0) & mask) !== ((base[i] ?? 0) & mask)) return false;
  }
  return true;
}

/** The tables as subnets, parsed the first time an address is looked up. */
let tables:
  | {
      v4: (readonly [string, Subnet[]])[];
      v6: (readonly [string, Subnet[]])[];
      nat64: Subnet;
      ipv4Compatible: Subnet;
      globalUnicast: Subnet;
    }
  | undefined;

function subnets() {
  const v6 = (cidr: string) => subnet(cidr, ipv6Parts);
  tables ??= {
    v4: IPV4_RANGES.map(([name, list]) => [name, list.map((c) => subnet(c, ipv4Parts))] as const),
    v6: IPV6_RANGES.map(([name, list]) => [name, list.map(v6)] as const),
    nat64: v6("64:ff9b::/96"),
    /** IPv4-compatible (RFC 4291 §2.5.5.1, deprecated): the low 32 bits of `::/96`. */
    ipv4Compatible: v6("::/96"),
    /** IANA allocates global unicast from 2000::/3 only; any other "unicast" is unassigned. */
    globalUnicast: v6("2000::/3"),
  };
  return tables;
}

function rangeIn(parts: Parts, ranges: readonly (readonly [string, Subnet[]])[]): string {
  return ranges.find(([, list]) => list.some((s) => inSubnet(parts, s)))?.[0] ?? "unicast";
}

/** The range of `host`, a URL's hostname, or undefined when it is a name, not an address. */
export function addressRange(host: string): AddressRange | undefined {
  if (host.startsWith("[") && host.endsWith("]")) return ipv6Range(ipv6Parts(host.slice(1, -1)));
  // The URL parser has already turned every IPv4 spelling (decimal, octal, hex, short) into
  // dotted quads; a hostname in any other form is a name.
  const v4 = ipv4Parts(host);
  return v4 === undefined ? undefined : { range: rangeIn(v4, subnets().v4) };
}

/** The IPv4 address in the 32 bits at `parts[at]` and `parts[at + 1]`, inverted with `mask`. */
function ipv4At(parts: Parts, at: number, mask = 0): Parts {
  return [(parts[at] ?? 0) ^ mask, (parts[at + 1] ?? 0) ^ mask];
}

function embedded(v4: Parts, form: string): AddressRange {
  const [high = 0, low = 0] = v4;
  const address = [high >> 8, high & 0xff, low >> 8, low & 0xff].join(".");
  return { range: rangeIn(v4, subnets().v4), embedded: { address, form } };
}

function ipv6Range(parts: Parts): AddressRange {
  const { v6, nat64, ipv4Compatible, globalUnicast } = subnets();
  const range = rangeIn(parts, v6);
  switch (range) {
    case "ipv4Mapped":
      return embedded(ipv4At(parts, 6), "IPv4-mapped");
    case "rfc6145":
      return embedded(ipv4At(parts, 6), "IPv4-translated");
    case "6to4":
      return embedded(ipv4At(parts, 1), "6to4");
    case "teredo": {
      // RFC 4380: the server's address, and the client's inverted in the low 32 bits.
      const server = embedded(ipv4At(parts, 2), "Teredo server");
      return server.range === "unicast"
        ? embedded(ipv4At(parts, 6, 0xffff), "Teredo client")
        : server;
    }
    case "rfc6052":
      // 64:ff9b::/96 carries the address it translates to; 64:ff9b:1::/48 (RFC 8215) is for
      // local use, translating into a network's own space.
      return inSubnet(parts, nat64) ? embedded(ipv4At(parts, 6), "NAT64") : { range: "localNat64" };
    case "unicast": {
      if (!inSubnet(parts, ipv4Compatible)) {
        return inSubnet(parts, globalUnicast) ? { range } : { range: "unassigned" };
      }
      // Deprecated and routed nowhere: refused whatever it carries, named by what it carries.
      const carried = embedded(ipv4At(parts, 6), "IPv4-compatible");
      return carried.range === "unicast" ? { range: "ipv4Compatible" } : carried;
    }
    default:
      return { range };
  }
}
