import { readdir } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { describe, expect, it } from "vitest";
import { call, REQUEST_TIMEOUT_MS, text } from "./local-worker.ts";
import { persistedWorker } from "./persisted-worker.ts";

/**
 * Design §18 invariant 20 over a real socket, on the storage wrangler's local runtime keeps:
 * forged tenant keys and hook URLs (unknown tenants, unknown key ids and hook ids of a real
 * tenant, with and without a tag) create no file under the persist folder. Local workerd creates
 * an object's SQLite file as soon as the object is addressed, even when it stores nothing, so
 * the count shows whether the worker addressed one.
 */

const ADMIN_KEY = "sk-local-admin";
/** Forged requests in all, and how many are in flight at once. */
const FORGED = 1_000;
const PARALLEL = 20;

const { base, persistDir } = persistedWorker("spindle-e2e-forged-", () => ({
  SPINDLE_ID_SECRET: "e2e-id-secret",
}));

/**
 * Every file under the persist folder, relative to it: each object's SQLite database
 * (`v3/do/{script}-{class}/{id}.sqlite`), miniflare's index of each class's objects and of its
 * cache and D1 simulators (`metadata.sqlite`), R2's blobs. A database's `-wal` and `-shm` files
 * count as the database: SQLite makes them while it is open and removes them when it closes, as
 * an object goes idle. Miniflare's own trace store (`v3/observability/`) records every request
 * and is not storage of the service's, so it is left out.
 */
async function storedFiles(): Promise<string[]> {
  const root = persistDir();
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  const paths = entries
    .filter((entry) => entry.isFile())
    .map((entry) => relative(root, join(entry.parentPath, entry.name)).split(sep).join("/"))
    .filter((path) => !path.startsWith("v3/observability/"))
    .map((path) => path.replace(/-(wal|shm)$/, ""));
  return [...new Set(paths)].sort();
}

const ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const random = (length: number, alphabet = ALPHABET) =>
  Array.from(
    crypto.getRandomValues(new Uint8Array(length)),
    (b) => alphabet[b % alphabet.length],
  ).join("");
const hex = (length: number) => random(length, "0123456789abcdef");
/** A key id as the service makes them (16 random characters and a 32-digit tag), or an older one. */
const keyId = (i: number) => `key_${random(16)}${i % 2 === 0 ? hex(32) : ""}`;
const place = (i: number) => (i % 3 === 0 ? "eu" : "g");
const hookSegment = (i: number) => `hook_${random(12)}${i % 2 === 0 ? `.${hex(32)}` : ""}`;

interface Forged {
  path: string;
  key: string | null;
  method: string;
}

function forgedRequests(tenant: string): Forged[] {
  const kinds: ((i: number) => Forged)[] = [
    // A well-formed key of a tenant that does not exist.
    (i) => ({
      method: "GET",
      path: "/v1/threads",
      key: `sk_${place(i)}.ten_${random(12)}.${keyId(i)}.${random(43)}`,
    }),
    // A key of the real tenant with a key id it never made.
    (i) => ({
      method: "GET",
      path: "/v1/threads",
      key: `sk_g.${tenant}.${keyId(i)}.${random(43)}`,
    }),
    // A hook of a tenant that does not exist.
    (i) => ({
      method: "POST",
      path: `/hooks/${i % 3 === 0 ? "eu." : ""}ten_${random(12)}/${hookSegment(i)}`,
      key: null,
    }),
    // A hook the real tenant does not have.
    (i) => ({ method: "POST", path: `/hooks/${tenant}/${hookSegment(i)}`, key: null }),
  ];
  return Array.from({ length: FORGED }, (_, i) => {
    const kind = kinds[i % kinds.length];
    if (!kind) throw new Error("unreachable");
    return kind(Math.floor(i / kinds.length));
  });
}

describe("forged identifiers over a loopback socket", () => {
  it("1,000 forged keys and hook URLs are refused as before and create no file", async () => {
    const tenant = `e2e_${random(8)}`;
    await text(await call(base(), "POST", "/v1/admin/tenants", { id: tenant }, ADMIN_KEY), 201);
    const { key } = JSON.parse(
      await text(
        await call(base(), "POST", `/v1/admin/tenants/${tenant}/keys`, {}, ADMIN_KEY),
        201,
      ),
    ) as { key: string };
    const hook = JSON.parse(
      await text(
        await call(
          base(),
          "POST",
          "/v1/hooks",
          { thread: "t", verify: { scheme: "standard" } },
          key,
        ),
        201,
      ),
    ) as { url: string };
    expect(new URL(hook.url).pathname.startsWith(`/hooks/${tenant}/`)).toBe(true);

    const before = await storedFiles();
    // The counting sees objects: the real tenant's is there, and only it.
    const tenantObjects = (paths: string[]) =>
      paths.filter((path) => /^v3\/do\/spindle-Tenant\/[0-9a-f]{64}\.sqlite$/.test(path));
    expect(tenantObjects(before)).toHaveLength(1);

    const requests = forgedRequests(tenant);
    const statuses = new Map<string, number>();
    for (let i = 0; i < requests.length; i += PARALLEL) {
      await Promise.all(
        requests.slice(i, i + PARALLEL).map(async ({ method, path, key: forged }) => {
          const res =
            forged === null
              ? await fetch(new URL(path, base()), {
                  method,
                  headers: { "content-type": "application/json" },
                  body: "{}",
                  signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
                })
              : await call(base(), method, path, undefined, forged);
          await res.body?.cancel();
          const kind = `${method} ${res.status}`;
          statuses.set(kind, (statuses.get(kind) ?? 0) + 1);
        }),
      );
    }
    expect(Object.fromEntries(statuses)).toEqual({ "GET 401": FORGED / 2, "POST 404": FORGED / 2 });
    expect(await storedFiles()).toEqual(before);

    // The real key and the real hook URL still reach the tenant.
    expect((await call(base(), "GET", "/v1/threads", undefined, key)).status).toBe(200);
    const unsigned = await fetch(hook.url, { method: "POST", body: "{}" });
    expect(unsigned.status).toBe(401);
  });
});
