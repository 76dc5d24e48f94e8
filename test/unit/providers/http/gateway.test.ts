import { describe, expect, it } from "vitest";
import type { FetchFn } from "../../../../shared/providers/http/attempts.ts";
import { throughGateway } from "../../../../shared/providers/http/gateway.ts";

/** A fetch that answers nothing over the network: it records what it was asked. */
function recorder() {
  const seen: { url: string; headers: Headers }[] = [];
  const fetch: FetchFn = async (url, init) => {
    seen.push({ url, headers: new Headers(init.headers) });
    return new Response("ok");
  };
  return { fetch, seen };
}

const GATEWAY = "https://gateway.ai.cloudflare.com/v1/acct/gw/openai/responses";

describe("throughGateway", () => {
  it("adds the gateway's token and turns its response cache off, keeping the provider's key", async () => {
    const { fetch, seen } = recorder();
    await throughGateway(fetch, "gw-token")(GATEWAY, {
      method: "POST",
      headers: { authorization: "Bearer sk-provider", "content-type": "application/json" },
      body: "{}",
    });
    const headers = seen[0]?.headers;
    expect(headers?.get("cf-aig-authorization")).toBe("Bearer gw-token");
    expect(headers?.get("cf-aig-skip-cache")).toBe("true");
    expect(headers?.get("authorization")).toBe("Bearer sk-provider");
    expect(headers?.get("content-type")).toBe("application/json");
  });

  it("sends no token to an unauthenticated gateway, and still skips its cache", async () => {
    const { fetch, seen } = recorder();
    await throughGateway(fetch, undefined)(GATEWAY, { method: "POST", body: "{}" });
    expect(seen[0]?.headers.has("cf-aig-authorization")).toBe(false);
    expect(seen[0]?.headers.get("cf-aig-skip-cache")).toBe("true");
  });

  it("adds nothing to a request to another host, even one that names the gateway in its path", async () => {
    const { fetch, seen } = recorder();
    const wrapped = throughGateway(fetch, "gw-token");
    await wrapped("http://127.0.0.1:8932/v1/responses", { method: "POST", headers: { a: "1" } });
    await wrapped("http://127.0.0.1:8932/gateway.ai.cloudflare.com/v1", { method: "POST" });
    for (const { headers } of seen) {
      expect(headers.has("cf-aig-authorization")).toBe(false);
      expect(headers.has("cf-aig-skip-cache")).toBe(false);
    }
    expect(seen[0]?.headers.get("a")).toBe("1");
  });
});
