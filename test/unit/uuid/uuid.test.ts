/** `shared/uuid/`: v7's layout and order, v5 against values computed independently. */
import { describe, expect, it } from "vitest";
import { uuidv5, uuidv7 } from "../../../shared/uuid/index.ts";

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("uuidv7", () => {
  it("is a version-7, RFC 9562 variant UUID whose first 48 bits are the time in ms", () => {
    const before = Date.now();
    const id = uuidv7();
    const after = Date.now();
    expect(id).toMatch(V7);
    const ms = Number.parseInt(id.replaceAll("-", "").slice(0, 12), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after + 1);
  });

  it("sorts in the order the ids were made, many within one millisecond included", () => {
    const ids = Array.from({ length: 5000 }, () => uuidv7());
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe("uuidv5", () => {
  it("matches RFC 9562's example and Python's uuid.uuid5", () => {
    // RFC 9562 appendix A.4: "www.example.com" in the DNS namespace.
    expect(uuidv5("www.example.com", "6ba7b810-9dad-11d1-80b4-00c04fd430c8")).toBe(
      "2ed6657d-e927-568b-95e1-2665a8aea6a2",
    );
    // uuid.uuid5(uuid.NAMESPACE_URL, "https://example.com/ü")
    expect(uuidv5("https://example.com/ü", "6ba7b811-9dad-11d1-80b4-00c04fd430c8")).toBe(
      "a17f7a1d-6bb5-51a9-9d32-f9d2fdeec8b6",
    );
  });
});
