/**
 * `addressRange` against ipaddr.js (2.5, which it follows): every IPv4 and IPv6 address, random
 * or drawn inside a special-use range, gets the range ipaddr.js names, and the IPv4 address an
 * IPv6 form carries is read from the same bits.
 */
import fc from "fast-check";
import ipaddr from "ipaddr.js";
import { describe, expect, it } from "vitest";
import { addressRange } from "../../../shared/outbound/address-range.ts";

/** What ipaddr.js says of the address: its range, and for the forms that carry one the IPv4 address. */
function reference(host: string): { range: string; carried?: string } {
  if (!host.startsWith("[")) return { range: ipaddr.IPv4.parse(host).range() };
  const address = ipaddr.IPv6.parse(host.slice(1, -1));
  const at = (i: number, mask = 0) => {
    const high = (address.parts[i] ?? 0) ^ mask;
    const low = (address.parts[i + 1] ?? 0) ^ mask;
    return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]).toString();
  };
  const range = address.range();
  const carried: Record<string, string> = { ipv4Mapped: at(6), rfc6145: at(6), "6to4": at(1) };
  return carried[range] === undefined ? { range } : { range, carried: carried[range] };
}

/** Every subnet of ipaddr.js's special-use tables, as bits, so draws land inside them and next to them. */
function subnetsOf(ranges: Record<string, unknown>): { bits: boolean[]; prefix: number }[] {
  return Object.values(ranges).flatMap((value) => {
    const list = (Array.isArray((value as unknown[])[0]) ? value : [value]) as [
      { toByteArray(): number[] },
      number,
    ][];
    return list.map(([address, prefix]) => ({
      bits: address
        .toByteArray()
        .flatMap((byte) => [7, 6, 5, 4, 3, 2, 1, 0].map((i) => ((byte >> i) & 1) === 1)),
      prefix,
    }));
  });
}

/** ipaddr.js's own table (untyped in its declarations). */
const specialRanges = (prototype: object) =>
  (prototype as { SpecialRanges: Record<string, unknown> }).SpecialRanges;

const V4_SUBNETS = subnetsOf(specialRanges(ipaddr.IPv4.prototype));
const V6_SUBNETS = subnetsOf(specialRanges(ipaddr.IPv6.prototype));

/** An address inside a subnet (its host bits random), or just outside it (its last prefix bit flipped). */
function near(subnets: { bits: boolean[]; prefix: number }[], size: number) {
  return fc
    .tuple(
      fc.constantFrom(...subnets),
      fc.array(fc.boolean(), { minLength: size, maxLength: size }),
      fc.boolean(),
    )
    .map(([{ bits, prefix }, random, outside]) =>
      bits.map((bit, i) =>
        i < prefix ? (outside && i === prefix - 1 ? !bit : bit) : (random[i] ?? false),
      ),
    );
}

const bytesOf = (bits: boolean[]) =>
  Array.from({ length: bits.length / 8 }, (_, i) =>
    bits.slice(8 * i, 8 * i + 8).reduce((byte, bit) => (byte << 1) | (bit ? 1 : 0), 0),
  );
const anyBits = (size: number) => fc.array(fc.boolean(), { minLength: size, maxLength: size });

const ipv4 = fc.oneof(near(V4_SUBNETS, 32), anyBits(32)).map((bits) => bytesOf(bits).join("."));
const ipv6 = fc.oneof(near(V6_SUBNETS, 128), anyBits(128)).map((bits) => {
  const bytes = bytesOf(bits);
  const parts = Array.from(
    { length: 8 },
    (_, i) => ((bytes[2 * i] ?? 0) << 8) | (bytes[2 * i + 1] ?? 0),
  );
  // The URL parser's form: hex, shortened.
  return new URL(`http://[${parts.map((p) => p.toString(16)).join(":")}]/`).hostname;
});

describe("address ranges, as ipaddr.js names them", () => {
  it("IPv4: the same range for every address", () => {
    fc.assert(
      fc.property(ipv4, (host) => {
        expect(addressRange(host)?.range).toBe(reference(host).range);
      }),
      { numRuns: 3000 },
    );
  });

  it("IPv6: the same range, and the same IPv4 address where the form carries one", () => {
    fc.assert(
      fc.property(ipv6, (host) => {
        const ours = addressRange(host);
        const theirs = reference(host);
        expect(ours).toBeDefined();
        if (theirs.carried !== undefined) {
          expect(ours?.embedded?.address).toBe(theirs.carried);
        } else if (
          ours?.embedded === undefined &&
          !["unassigned", "localNat64"].includes(ours?.range ?? "")
        ) {
          expect(ours?.range).toBe(theirs.range);
        }
      }),
      { numRuns: 3000 },
    );
  });

  it("a name is no address", () => {
    expect(addressRange("example.com")).toBeUndefined();
    expect(addressRange("01.2.3.4")).toBeUndefined();
  });
});
