/**
 * Per-tenant limits, through the running service: the counts a tenant's object holds (API keys,
 * hooks, webhook endpoints) are refused past their limit with 409 `limit_exceeded` naming it,
 * also when creates race at the limit, and a place freed by a delete is taken again; what a hook
 * or an endpoint stores is bounded in UTF-8 bytes, refused at the edge with 400
 * `invalid_request` at the field, and nothing of a refused create is kept.
 */
import { describe, expect, it } from "vitest";
import {
  endpointDescriptionMaxBytes,
  hookInputTemplateMaxBytes,
  hookThreadConfigMaxBytes,
  hookThreadTemplateMaxBytes,
  type TenantLimitName,
  tenantLimits,
} from "../../../shared/api/index.ts";
import { api, json } from "../helpers/api.ts";
import { ADMIN_KEY, tenantWithKey } from "../helpers/tenancy.ts";

interface Problem {
  status: number;
  code: string;
  limit?: string;
  max?: number;
  errors?: { path: string; message: string }[];
}

const hookBody = (i: number | string) => ({ verify: { scheme: "github" }, thread: `t-${i}` });
// A loopback URL: nothing in these tests sends an event to it.
const endpointBody = { url: "http://127.0.0.1:9/events", events: ["turn.completed"] };

/** The refusal of a create past `limit`: 409, the code, the limit's name and its value. */
async function expectLimit(res: Response, limit: TenantLimitName): Promise<void> {
  expect(res.headers.get("content-type")).toBe("application/problem+json");
  const body = (await res.json()) as Problem;
  expect({ ...body, httpStatus: res.status }).toMatchObject({
    httpStatus: 409,
    status: 409,
    code: "limit_exceeded",
    limit,
    max: tenantLimits[limit],
  });
}

/** The ids of every item of a list route (at most 100, one page). */
async function listed(path: string, key: string): Promise<string[]> {
  const page = await json<{ data: { id: string }[]; next_cursor: string | null }>(
    await api("GET", `${path}?limit=100`, undefined, key),
  );
  expect(page.next_cursor).toBe(null);
  return page.data.map((item) => item.id);
}

/** `count` creates, `parallel` at a time; their statuses. */
async function createMany(
  count: number,
  parallel: number,
  create: (i: number) => Promise<Response>,
): Promise<number[]> {
  const statuses: number[] = [];
  for (let start = 0; start < count; start += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - start) }, (_, j) =>
      create(start + j),
    );
    for (const res of await Promise.all(batch)) {
      statuses.push(res.status);
      await res.body?.cancel();
    }
  }
  return statuses;
}

/** How many answers had each status. */
function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

describe("counts per tenant", () => {
  it("API keys: the tenant's keys up to the limit, then 409 on both key routes; a revoke frees a place", async () => {
    const max = tenantLimits.api_keys_per_tenant;
    const { tenant, key, keyId } = await tenantWithKey();
    const admin = (path: string) => api("POST", path, {}, ADMIN_KEY);
    const made = await createMany(max - 1, 10, () => admin(`/v1/admin/tenants/${tenant.id}/keys`));
    expect(tally(made)).toEqual({ 201: max - 1 });
    await expectLimit(await admin(`/v1/admin/tenants/${tenant.id}/keys`), "api_keys_per_tenant");
    await expectLimit(await api("POST", "/v1/keys", {}, key), "api_keys_per_tenant");
    const keys = await listed("/v1/keys", key);
    expect(keys).toHaveLength(max);
    const revoked = keys.find((id) => id !== keyId) ?? "";
    expect((await api("DELETE", `/v1/keys/${revoked}`, undefined, key)).status).toBe(204);
    await json(await api("POST", "/v1/keys", {}, key), 201);
    await expectLimit(await api("POST", "/v1/keys", {}, key), "api_keys_per_tenant");
  });

  it("hooks: up to the limit, then 409 naming it; a delete frees a place", async () => {
    const max = tenantLimits.hooks_per_tenant;
    const { key } = await tenantWithKey();
    const made = await createMany(max, 10, (i) => api("POST", "/v1/hooks", hookBody(i), key));
    expect(tally(made)).toEqual({ 201: max });
    await expectLimit(await api("POST", "/v1/hooks", hookBody("over"), key), "hooks_per_tenant");
    const hooks = await listed("/v1/hooks", key);
    expect(hooks).toHaveLength(max);
    expect((await api("DELETE", `/v1/hooks/${hooks[0]}`, undefined, key)).status).toBe(204);
    await json(await api("POST", "/v1/hooks", hookBody("again"), key), 201);
    await expectLimit(await api("POST", "/v1/hooks", hookBody("over"), key), "hooks_per_tenant");
  });

  it("webhook endpoints: up to the limit, then 409 naming it; a delete frees a place", async () => {
    const max = tenantLimits.webhook_endpoints_per_tenant;
    const { key } = await tenantWithKey();
    const made = await createMany(max, 10, () =>
      api("POST", "/v1/webhook-endpoints", endpointBody, key),
    );
    expect(tally(made)).toEqual({ 201: max });
    const over = await api("POST", "/v1/webhook-endpoints", endpointBody, key);
    await expectLimit(over, "webhook_endpoints_per_tenant");
    const endpoints = await listed("/v1/webhook-endpoints", key);
    expect(endpoints).toHaveLength(max);
    const first = `/v1/webhook-endpoints/${endpoints[0]}`;
    // A disabled endpoint is still held: it counts.
    await json(await api("PATCH", first, { disabled: true }, key));
    await expectLimit(
      await api("POST", "/v1/webhook-endpoints", endpointBody, key),
      "webhook_endpoints_per_tenant",
    );
    expect((await api("DELETE", first, undefined, key)).status).toBe(204);
    await json(await api("POST", "/v1/webhook-endpoints", endpointBody, key), 201);
  });
});

describe("creates racing at the limit", () => {
  it("hooks: of 10 concurrent creates with 5 places left, exactly 5 are made", async () => {
    const max = tenantLimits.hooks_per_tenant;
    const { key } = await tenantWithKey();
    await createMany(max - 5, 10, (i) => api("POST", "/v1/hooks", hookBody(i), key));
    const raced = await createMany(10, 10, (i) => api("POST", "/v1/hooks", hookBody(`r${i}`), key));
    expect(tally(raced)).toEqual({ 201: 5, 409: 5 });
    expect(await listed("/v1/hooks", key)).toHaveLength(max);
  });

  it("API keys: of 10 concurrent creates with 3 places left, exactly 3 are made", async () => {
    const max = tenantLimits.api_keys_per_tenant;
    const { tenant, key } = await tenantWithKey();
    const path = `/v1/admin/tenants/${tenant.id}/keys`;
    await createMany(max - 4, 10, () => api("POST", path, {}, ADMIN_KEY));
    const raced = await createMany(10, 10, (i) =>
      i % 2 === 0 ? api("POST", path, {}, ADMIN_KEY) : api("POST", "/v1/keys", {}, key),
    );
    expect(tally(raced)).toEqual({ 201: 3, 409: 7 });
    expect(await listed("/v1/keys", key)).toHaveLength(max);
  });

  it("webhook endpoints: of 30 concurrent creates, exactly the limit are made", async () => {
    const max = tenantLimits.webhook_endpoints_per_tenant;
    const { key } = await tenantWithKey();
    const raced = await createMany(30, 30, () =>
      api("POST", "/v1/webhook-endpoints", endpointBody, key),
    );
    expect(tally(raced)).toEqual({ 201: max, 409: 30 - max });
    expect(await listed("/v1/webhook-endpoints", key)).toHaveLength(max);
  });
});

describe("sizes of what a hook or an endpoint stores", () => {
  /** `bytes` bytes of UTF-8 in two-byte characters (so fewer characters than bytes). */
  const twoByteText = (bytes: number) => "é".repeat(bytes / 2);

  async function expectRefusedAt(res: Response, path: string): Promise<void> {
    const body = (await json<Problem>(res, 400)) as Problem;
    expect(body.code).toBe("invalid_request");
    expect(body.errors).toEqual([{ path, message: expect.stringContaining("bytes") }]);
  }

  it("templates: at most their limit in bytes, not characters", async () => {
    const { key } = await tenantWithKey();
    const create = (body: Record<string, unknown>) =>
      api("POST", "/v1/hooks", { ...hookBody("x"), ...body }, key);
    await json(await create({ input: twoByteText(hookInputTemplateMaxBytes) }), 201);
    await expectRefusedAt(
      await create({ input: twoByteText(hookInputTemplateMaxBytes + 2) }),
      "/input",
    );
    await json(await create({ thread: twoByteText(hookThreadTemplateMaxBytes) }), 201);
    await expectRefusedAt(
      await create({ thread: twoByteText(hookThreadTemplateMaxBytes + 2) }),
      "/thread",
    );
    expect(await listed("/v1/hooks", key)).toHaveLength(2);
  });

  it("a hook's thread_config: at most its limit in bytes of JSON", async () => {
    const { key } = await tenantWithKey();
    const config = (bytes: number) => {
      const base = JSON.stringify({ developer_instructions: "" }).length;
      return { developer_instructions: "x".repeat(bytes - base) };
    };
    const create = (thread_config: unknown) =>
      api("POST", "/v1/hooks", { ...hookBody("x"), thread_config }, key);
    await json(await create(config(hookThreadConfigMaxBytes)), 201);
    await expectRefusedAt(await create(config(hookThreadConfigMaxBytes + 1)), "/thread_config");
    expect(await listed("/v1/hooks", key)).toHaveLength(1);
  });

  it("an endpoint's description: at most its limit in bytes, on create and on patch", async () => {
    const { key } = await tenantWithKey();
    const fits = twoByteText(endpointDescriptionMaxBytes);
    const over = twoByteText(endpointDescriptionMaxBytes + 2);
    const create = (description: string) =>
      api("POST", "/v1/webhook-endpoints", { ...endpointBody, description }, key);
    const made = await json<{ id: string }>(await create(fits), 201);
    await expectRefusedAt(await create(over), "/description");
    const path = `/v1/webhook-endpoints/${made.id}`;
    await expectRefusedAt(await api("PATCH", path, { description: over }, key), "/description");
    expect(await json(await api("GET", path, undefined, key))).toMatchObject({ description: fits });
    expect(await listed("/v1/webhook-endpoints", key)).toHaveLength(1);
  });
});
