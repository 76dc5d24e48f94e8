/**
 * The `Tenant` object's tables (one object per tenant), as numbered migration steps applied by
 * `migrate` (`thread/storage/schema.ts`). Names are persisted: never rename one; add a step.
 * - tenant_meta: small JSON values: `record` (the tenant, as the directory has it), `deleted`.
 * - tenant_keys: API keys: id, SHA-256 digest of the whole key (the secret is never stored), the
 *   resource without `last_used_at`, which has its own column (written at most once a minute).
 * - tenant_threads: the thread index: one row per thread (its resource as of its last push), or a
 *   reservation under `max_threads` (`body` null until the thread's first push).
 * - tenant_thread_metadata: each indexed thread's metadata, one row per key, for the filters.
 * - tenant_thread_sync: per thread id ever pushed: the newest push version applied and the newest
 *   ledger entry taken (the thread's incarnation, the line's seq). Kept after the thread is
 *   deleted, so a late push changes nothing.
 * - tenant_usage: the usage ledger, rolled up by UTC day, thread and model.
 * - tenant_daily_tokens: input + output tokens per UTC day, for `tokens_per_day`.
 * - tenant_hooks: inbound hooks (design §12): the resource, the signing secret (kept as given:
 *   an HMAC needs it), and the previous secret with the time it stops verifying.
 * - tenant_hook_deliveries: the hooks' delivery logs, one row per request (`rev`: the newest
 *   change applied, so a late push is ignored); kept 7 days.
 * - tenant_endpoints: outbound webhook endpoints: the resource, the `whsec_` secret, the previous
 *   secret and when it stops signing.
 * - tenant_webhook_deliveries: each event to each endpoint (`webhook-id`), its status and
 *   attempts; kept 7 days.
 * - tenant_admissions: the admission each thread holds under `max_running_turns` and
 *   `tokens_per_day` (`tenant/quota-grants.ts`): its grant, the tokens its share still reserves
 *   (the share less the thread's usage counted since), when it was granted.
 * - tenant_delivery_claims: the hooks' dedup keys of the last 72 hours, each with the thread its
 *   first copy went to (`tenant/delivery-claims.ts`).
 * - tenant_webhook_leases: each delivery still under way (`tenant/webhook-leases.ts`): its queue message
 *   (to send it again), the current hand-off to the queue, and until when that one is in flight
 *   (epoch ms). A row with a payload is up to 20 KB, so the table keeps its rowid.
 * - tenant_mcp_servers: the registered MCP servers (design §16), by label (`id`): the resource
 *   (`tenant/mcp-servers.ts`) and, apart, the headers sent to the server (its credentials, as
 *   JSON), which nothing answers. The step that made it also gave the `tools` scope to every
 *   key that held each scope there was before (a key made with every scope).
 */
export const TENANT_MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS tenant_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
   CREATE TABLE IF NOT EXISTS tenant_keys (
     id TEXT PRIMARY KEY, digest BLOB NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL,
     last_used_at TEXT);
   CREATE INDEX IF NOT EXISTS tenant_keys_created ON tenant_keys (created_at, id);
   CREATE TABLE IF NOT EXISTS tenant_threads (
     thread_id TEXT PRIMARY KEY, status TEXT, updated_at TEXT, body TEXT, reserved_until INTEGER);
   CREATE INDEX IF NOT EXISTS tenant_threads_updated ON tenant_threads (updated_at, thread_id);
   CREATE INDEX IF NOT EXISTS tenant_threads_status
     ON tenant_threads (status, updated_at, thread_id);
   CREATE TABLE IF NOT EXISTS tenant_thread_metadata (
     thread_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
     PRIMARY KEY (thread_id, key));
   CREATE INDEX IF NOT EXISTS tenant_thread_metadata_value
     ON tenant_thread_metadata (key, value, thread_id);
   CREATE TABLE IF NOT EXISTS tenant_thread_sync (
     thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL DEFAULT 0,
     usage_incarnation TEXT NOT NULL DEFAULT '', usage_seq INTEGER NOT NULL DEFAULT 0);
   CREATE TABLE IF NOT EXISTS tenant_usage (
     day TEXT NOT NULL, thread_id TEXT NOT NULL, model TEXT NOT NULL,
     input_tokens INTEGER NOT NULL, cached_input_tokens INTEGER NOT NULL,
     output_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL,
     requests INTEGER NOT NULL, turns INTEGER NOT NULL,
     PRIMARY KEY (day, thread_id, model));
   CREATE TABLE IF NOT EXISTS tenant_daily_tokens (day TEXT PRIMARY KEY, tokens INTEGER NOT NULL);`,
  `CREATE TABLE IF NOT EXISTS tenant_hooks (
     id TEXT PRIMARY KEY, created_at TEXT NOT NULL, body TEXT NOT NULL, secret TEXT NOT NULL,
     previous_secret TEXT, previous_until INTEGER);
   CREATE INDEX IF NOT EXISTS tenant_hooks_created ON tenant_hooks (created_at, id);
   CREATE TABLE IF NOT EXISTS tenant_hook_deliveries (
     id TEXT PRIMARY KEY, hook_id TEXT NOT NULL, received_at TEXT NOT NULL, rev INTEGER NOT NULL,
     body TEXT NOT NULL);
   CREATE INDEX IF NOT EXISTS tenant_hook_deliveries_hook
     ON tenant_hook_deliveries (hook_id, received_at, id);
   CREATE TABLE IF NOT EXISTS tenant_endpoints (
     id TEXT PRIMARY KEY, created_at TEXT NOT NULL, body TEXT NOT NULL, secret TEXT NOT NULL,
     previous_secret TEXT, previous_until INTEGER);
   CREATE INDEX IF NOT EXISTS tenant_endpoints_created ON tenant_endpoints (created_at, id);
   CREATE TABLE IF NOT EXISTS tenant_webhook_deliveries (
     id TEXT PRIMARY KEY, endpoint_id TEXT NOT NULL, created_at TEXT NOT NULL,
     status TEXT NOT NULL, body TEXT NOT NULL);
   CREATE INDEX IF NOT EXISTS tenant_webhook_deliveries_endpoint
     ON tenant_webhook_deliveries (endpoint_id, created_at, id);`,
  `CREATE TABLE IF NOT EXISTS tenant_admissions (
     thread_id TEXT PRIMARY KEY, grant_id INTEGER NOT NULL, share INTEGER,
     granted_at INTEGER NOT NULL);`,
  `CREATE TABLE IF NOT EXISTS tenant_delivery_claims (
     hook_id TEXT NOT NULL, key TEXT NOT NULL, thread_id TEXT NOT NULL,
     claimed_at INTEGER NOT NULL, PRIMARY KEY (hook_id, key));
   CREATE INDEX IF NOT EXISTS tenant_delivery_claims_at ON tenant_delivery_claims (claimed_at);`,
  `CREATE TABLE IF NOT EXISTS tenant_webhook_leases (
     id TEXT PRIMARY KEY, endpoint_id TEXT NOT NULL, handoff INTEGER NOT NULL,
     in_flight_until INTEGER NOT NULL, message TEXT NOT NULL);
   CREATE INDEX IF NOT EXISTS tenant_webhook_leases_due ON tenant_webhook_leases (in_flight_until);`,
  `CREATE TABLE IF NOT EXISTS tenant_mcp_servers (
     id TEXT PRIMARY KEY, created_at TEXT NOT NULL, body TEXT NOT NULL, headers TEXT NOT NULL);
   CREATE INDEX IF NOT EXISTS tenant_mcp_servers_created ON tenant_mcp_servers (created_at, id);
   UPDATE tenant_keys SET body = json_insert(body, '$.scopes[#]', 'tools')
     WHERE (SELECT COUNT(DISTINCT value) FROM json_each(body, '$.scopes')
       WHERE value IN ('threads', 'hooks', 'keys', 'usage')) = 4;`,
];

/** The directory object's tables: every managed tenant's record, by id. */
export const DIRECTORY_MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS directory_tenants (id TEXT PRIMARY KEY, body TEXT NOT NULL);`,
];
