/**
 * The outbound URL policy (`shared/outbound/`): every form a host can take, refused or accepted,
 * in production and in development. Only checked: nothing here sends a request.
 */
import { describe, expect, it } from "vitest";
import { outboundUrlRefusal } from "../../../shared/outbound/index.ts";

const production = { allowLoopback: false };
const development = { allowLoopback: true };

/** The reason `url` is refused in production, or "ok". */
function verdict(url: string, options = production): string {
  return outboundUrlRefusal(url, options)?.reason ?? "ok";
}

describe("outbound URLs in production", () => {
  it.each([
    // The forms of the issue, each of which the former textual rule let through.
    ["https://localhost./", "special_use_name"],
    ["https://foo.localhost./", "special_use_name"],
    ["https://[::127.0.0.1]/", "non_public_address"],
    ["https://[64:ff9b::a9fe:a9fe]/", "non_public_address"],
    ["https://[fec0::1]/", "non_public_address"],
    ["https://100.64.0.1/", "non_public_address"],
    ["https://metadata.google.internal/", "special_use_name"],
    // Names: RFC 6761 (localhost, test, invalid, example), RFC 6762 (local, and the private
    // names of its appendix G), RFC 8375 (home.arpa), ICANN's .internal, RFC 7686 (onion).
    ["https://localhost/", "special_use_name"],
    ["https://LOCALHOST:8443/x", "special_use_name"],
    ["https://a.b.localhost/", "special_use_name"],
    ["https://localhost%2e/", "special_use_name"],
    ["https://.localhost/", "special_use_name"],
    ["https://foo.internal/", "special_use_name"],
    ["https://METADATA.Google.Internal./computeMetadata/v1/", "special_use_name"],
    ["https://printer.local/", "special_use_name"],
    ["https://nas.localdomain/", "special_use_name"],
    ["https://router.home.arpa/", "special_use_name"],
    ["https://1.0.0.127.in-addr.arpa/", "special_use_name"],
    ["https://hooks.test/", "special_use_name"],
    ["https://hooks.invalid/", "special_use_name"],
    ["https://hooks.example/", "special_use_name"],
    ["https://abc.onion/", "special_use_name"],
    ["https://svc.lan/", "special_use_name"],
    ["https://svc.corp/", "special_use_name"],
    ["https://svc.home/", "special_use_name"],
    ["https://svc.intranet/", "special_use_name"],
    ["https://svc.private/", "special_use_name"],
    ["https://webhooks/", "single_label_name"],
    ["https://webhooks./", "single_label_name"],
    ["https://com./", "single_label_name"],
    ["https://foo..example.com/", "invalid_url"],
    ["https://./", "invalid_url"],
    ["https://localhost../", "invalid_url"],
    // IPv4 literals, in every spelling the URL parser turns into the dotted form.
    ["https://127.0.0.1/", "non_public_address"],
    ["http://2130706433/", "scheme"],
    ["https://2130706433/", "non_public_address"],
    ["https://0177.0.0.1/", "non_public_address"],
    ["https://0x7f.1/", "non_public_address"],
    ["https://0x7f000001/", "non_public_address"],
    ["https://127.1/", "non_public_address"],
    ["https://127.0.0.1./", "non_public_address"],
    ["https://%31%32%37.0.0.1/", "non_public_address"],
    ["https://１２７.0.0.1/", "non_public_address"],
    ["https://0/", "non_public_address"],
    ["https://0.0.0.0/", "non_public_address"],
    ["https://10.1.2.3/", "non_public_address"],
    ["https://0300.0250.1.1/", "non_public_address"],
    ["https://192.168.257/", "non_public_address"],
    ["https://172.16.0.1/", "non_public_address"],
    ["https://172.20.0.1/x", "non_public_address"],
    ["https://192.168.1.1/x", "non_public_address"],
    ["https://172.31.255.255/", "non_public_address"],
    ["https://169.254.169.254/latest/meta-data/", "non_public_address"],
    ["https://100.100.100.200/", "non_public_address"],
    ["https://100.127.255.255/", "non_public_address"],
    ["https://192.0.0.1/", "non_public_address"],
    ["https://192.0.2.1/", "non_public_address"],
    ["https://198.18.0.1/", "non_public_address"],
    ["https://198.51.100.7/", "non_public_address"],
    ["https://203.0.113.7/", "non_public_address"],
    ["https://224.0.0.1/", "non_public_address"],
    ["https://239.255.255.250/", "non_public_address"],
    ["https://240.0.0.1/", "non_public_address"],
    ["https://255.255.255.255/", "non_public_address"],
    // IPv6 literals.
    ["https://[::1]/", "non_public_address"],
    ["https://[0:0:0:0:0:0:0:1]/", "non_public_address"],
    ["https://[::]/", "non_public_address"],
    ["https://[fe80::1]/", "non_public_address"],
    ["https://[febf::1]/", "non_public_address"],
    ["https://[fc00::1]/", "non_public_address"],
    ["https://[fd12:3456::1]/", "non_public_address"],
    ["https://[fec0::1]/", "non_public_address"],
    ["https://[ff02::1]/", "non_public_address"],
    ["https://[100::1]/", "non_public_address"],
    ["https://[2001:db8::1]/", "non_public_address"],
    ["https://[2001:2::1]/", "non_public_address"],
    ["https://[3fff::1]/", "non_public_address"],
    ["https://[4000::1]/", "non_public_address"],
    // IPv6 that embeds a non-public IPv4 address: mapped, translated, compatible, NAT64, 6to4,
    // Teredo (server or client).
    ["https://[::ffff:127.0.0.1]/", "non_public_address"],
    ["https://[::ffff:10.0.0.1]/", "non_public_address"],
    ["https://[::ffff:169.254.169.254]/", "non_public_address"],
    ["https://[::ffff:0:10.0.0.1]/", "non_public_address"],
    ["https://[::10.0.0.1]/", "non_public_address"],
    ["https://[::a9fe:a9fe]/", "non_public_address"],
    ["https://[::93.184.216.34]/", "non_public_address"],
    ["https://[64:ff9b::127.0.0.1]/", "non_public_address"],
    ["https://[64:ff9b::10.0.0.1]/", "non_public_address"],
    ["https://[64:ff9b:1::a00:1]/", "non_public_address"],
    ["https://[64:ff9b:1::808:808]/", "non_public_address"],
    ["https://[2002:a9fe:a9fe::]/", "non_public_address"],
    ["https://[2002:c0a8:101::1]/", "non_public_address"],
    ["https://[2002:7f00:1::1]/", "non_public_address"],
    ["https://[2001:0:a00:1::808:808]/", "non_public_address"],
    ["https://[2001:0:808:808::f5ff:fffe]/", "non_public_address"],
    // Scheme, credentials, and what is not a URL.
    ["http://hooks.example.com/spindle", "scheme"],
    ["ftp://hooks.example.com/", "scheme"],
    ["ws://hooks.example.com/", "scheme"],
    ["file:///etc/passwd", "scheme"],
    ["data:text/plain,hello", "scheme"],
    ["http://127.0.0.1:9000/hook", "scheme"],
    ["http://localhost:9000/hook", "scheme"],
    ["https://user:pass@hooks.example.com/x", "credentials"],
    ["https://user@hooks.example.com/x", "credentials"],
    ["https://:pass@hooks.example.com/x", "credentials"],
    ["not a url", "invalid_url"],
    ["/relative/path", "invalid_url"],
    ["https://[fe80::1%25eth0]/", "invalid_url"],
    ["https://1.2.3.4.5/", "invalid_url"],
    ["https://0x100000000/", "invalid_url"],
    ["", "invalid_url"],
  ])("%s is refused: %s", (url, reason) => {
    expect(verdict(url)).toBe(reason);
  });

  it.each([
    "https://example.com/hook",
    "https://hooks.example.com/spindle?x=1#frag",
    "HTTPS://Hooks.Example.COM/Hook",
    "https://example.com./hook",
    "https://example.com:8443/hook",
    "https://example.com:443/hook",
    "https://xn--4ca0b.com/",
    "https://ÄÖ.com/",
    "https://my-app.workers.dev/hook",
    "https://localhost.example.com/",
    "https://internal.example.com/",
    "https://local.example.org/",
    "https://test.example.net/",
    "https://93.184.216.34/",
    "https://1.1.1.1:8443/hook",
    "https://8.8.8.8/",
    "https://100.63.255.255/",
    "https://100.128.0.1/",
    "https://172.15.255.255/",
    "https://172.32.0.1/",
    "https://169.253.255.255/",
    "https://192.169.0.1/",
    "https://[2606:4700::1111]/",
    "https://[2001:4860:4860::8888]/",
    "https://[2a00:1450:4001:82a::200e]/",
    "https://[::ffff:93.184.216.34]/",
    "https://[64:ff9b::93.184.216.34]/",
    "https://[2002:5db8:d822::1]/",
    "https://[2001:0:5db8:d822::f7fe:fefe]/",
  ])("%s is accepted", (url) => {
    expect(verdict(url)).toBe("ok");
  });

  it("names why, in words: the range, the name, the embedded address", () => {
    expect(outboundUrlRefusal("https://100.64.0.1/", production)).toEqual({
      reason: "non_public_address",
      detail: "100.64.0.1 is a shared (carrier-grade NAT) address, not a public one",
    });
    expect(outboundUrlRefusal("https://[64:ff9b::a9fe:a9fe]/", production)).toEqual({
      reason: "non_public_address",
      detail:
        "[64:ff9b::a9fe:a9fe] embeds 169.254.169.254 (NAT64), a link-local address, not a public one",
    });
    expect(outboundUrlRefusal("https://metadata.google.internal/", production)).toEqual({
      reason: "special_use_name",
      detail: "metadata.google.internal is under .internal, reserved for private networks (ICANN)",
    });
    expect(outboundUrlRefusal("https://localhost./", production)?.detail).toBe(
      "localhost. is under .localhost, a loopback name (RFC 6761)",
    );
    expect(outboundUrlRefusal("https://webhooks/", production)?.detail).toBe(
      "webhooks is a single-label name: only a local resolver answers it",
    );
    expect(outboundUrlRefusal("http://hooks.example.com/", production)?.detail).toBe(
      "the scheme is http:, and an outbound URL is https",
    );
  });
});

describe("outbound URLs in development", () => {
  it.each([
    "http://127.0.0.1:9000/hook",
    "https://127.0.0.1:9000/hook",
    "http://127.8.9.10/hook",
    "http://localhost:9000/hook",
    "http://localhost./hook",
    "http://receiver.localhost:9000/hook",
    "http://[::1]:9000/hook",
    "https://example.com/hook",
  ])("%s is accepted: a local receiver, or a public https one", (url) => {
    expect(verdict(url, development)).toBe("ok");
  });

  it.each([
    ["http://hooks.example.com/hook", "scheme"],
    ["ftp://127.0.0.1/", "scheme"],
    ["http://user:pass@127.0.0.1:9000/", "credentials"],
    ["https://10.0.0.1/", "non_public_address"],
    ["https://169.254.169.254/", "non_public_address"],
    ["https://100.64.0.1/", "non_public_address"],
    ["https://[fec0::1]/", "non_public_address"],
    ["https://[64:ff9b::a9fe:a9fe]/", "non_public_address"],
    ["https://[::127.0.0.1]/", "non_public_address"],
    ["https://[::ffff:127.0.0.1]/", "non_public_address"],
    ["https://metadata.google.internal/", "special_use_name"],
    ["https://printer.local/", "special_use_name"],
    ["https://webhooks/", "single_label_name"],
  ])("%s is still refused: %s", (url, reason) => {
    expect(verdict(url, development)).toBe(reason);
  });

  it("says http is for a loopback host only", () => {
    expect(outboundUrlRefusal("http://hooks.example.com/", development)?.detail).toBe(
      "the scheme is http:, and an outbound URL is https (http only to a loopback host)",
    );
  });
});
