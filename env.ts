/**
 * The Worker's environment: the bindings declared in `wrangler.toml`, its `[vars]`, and the
 * secrets set with `wrangler secret put`. The one hand-kept definition, shared by `worker/` and
 * `durable-objects/` (`shared/` never sees bindings). Namespaces are untyped here so that this
 * file imports no class: the worker addresses objects through their RPC contracts in
 * `shared/api/`.
 */
export interface Env {
  /** One Durable Object per thread, named `{tenant}:{thread}` (class `Thread`). */
  THREAD: DurableObjectNamespace;
  /** One Durable Object per tenant, named by the tenant id (class `Tenant`, SQLite). */
  TENANT: DurableObjectNamespace;
  /** One object, `directory` (class `TenantDirectory`): the admin API's list of tenants. */
  TENANT_DIRECTORY: DurableObjectNamespace;
  /** The rollouts' permanent home: segments and checkpoint copies (tenants without jurisdiction). */
  ROLLOUT: R2Bucket;
  /** The R2 bucket of tenants whose jurisdiction is `eu` (a bucket created in the EU jurisdiction). */
  ROLLOUT_EU?: R2Bucket;
  /** The same for `fedramp`; without the binding, no FedRAMP tenant can be created. */
  ROLLOUT_FEDRAMP?: R2Bucket;
  /**
   * The webhook queue (producer and consumer in this worker): each event for each endpoint, sent
   * by its tenant's object (`durable-objects/tenant/webhook-sweep.ts`); its consumer delivers them
   * (`worker/webhook-consumer.ts`).
   */
  WEBHOOKS: Queue;
  /** `production` (wrangler.toml) or `development` (`npm start`, the test suites). */
  SPINDLE_ENV?: string;
  /** Secret: JSON object of lowercase hex SHA-256 of each API key → tenant id (`worker/auth.ts`). */
  SPINDLE_API_KEYS?: string;
  /** Secret: JSON array of lowercase hex SHA-256 of each admin key (`worker/auth.ts`). */
  SPINDLE_ADMIN_KEYS?: string;
  /**
   * Secret: the key of the tags in tenant key ids and hook URLs (`durable-objects/tenant/id-tags.ts`).
   * Required in production; a fixed value in development when unset. Changing it invalidates
   * every tenant key and hook URL.
   */
  SPINDLE_ID_SECRET?: string;
  /**
   * `true`: key ids and hook URLs made before they had tags are still accepted (they address
   * their tenant's object unchecked, so a forged one creates an object). Default false.
   */
  SPINDLE_ACCEPT_UNTAGGED_IDS?: string | boolean;
  /**
   * Comma-separated origins (`https://app.example.com`) whose browser pages may call the API
   * (CORS, `worker/cors.ts`). Unset or empty: none, and no CORS header is ever sent.
   */
  SPINDLE_CORS_ORIGINS?: string;
  /**
   * `copy`: a fork writes its source's lines again instead of borrowing the R2 segments that hold
   * them (every thread's R2 objects then stand alone). Default: forks share segments.
   */
  SPINDLE_FORKS?: string;
  /** Lines between checkpoints (default 250); tests lower it to exercise checkpoints. */
  SPINDLE_CHECKPOINT_EVERY_LINES?: string;
  /** History items per stored checkpoint group (default 250); tests lower it too. */
  SPINDLE_CHECKPOINT_GROUP_ITEMS?: string;
  /**
   * Multiplies the outbound retry schedule (5 s … 10 h); tests compress it (`0`: retry at once).
   * Default 1.
   */
  SPINDLE_WEBHOOK_RETRY_SCALE?: string;
  /** Milliseconds an outbound delivery attempt may take (default 15000); tests shorten it. */
  SPINDLE_WEBHOOK_TIMEOUT_MS?: string;
  /** The openai provider: API root (default https://api.openai.com/v1) and key (a secret). */
  OPENAI_BASE_URL?: string;
  OPENAI_API_KEY?: string;
  /** JSON array of models served by the openai provider (`shared/models/configured.ts`). */
  SPINDLE_OPENAI_MODELS?: string;
  /** The anthropic provider: API root (default https://api.anthropic.com/v1) and key (a secret). */
  ANTHROPIC_BASE_URL?: string;
  ANTHROPIC_API_KEY?: string;
  /** JSON array of models served by the anthropic provider (`shared/models/configured.ts`). */
  SPINDLE_ANTHROPIC_MODELS?: string;
  /**
   * A secret: the token of an authenticated Cloudflare AI Gateway, sent as
   * `cf-aig-authorization` on the requests of every HTTP provider whose base URL is a gateway's.
   */
  SPINDLE_AI_GATEWAY_TOKEN?: string;
  /**
   * The openai-chat provider (Chat Completions: vLLM, llama.cpp, Ollama, OpenRouter, …): API
   * root (default https://api.openai.com/v1) and key (a secret; a host that checks none takes
   * any). The provider serves turns once the key is set.
   */
  OPENAI_CHAT_BASE_URL?: string;
  OPENAI_CHAT_API_KEY?: string;
  /** Where openai-chat sends its key: `authorization` (Bearer, the default) or `api-key` (Azure). */
  OPENAI_CHAT_API_KEY_HEADER?: string;
  /** Sent as openai-chat's `api-version` query parameter (Azure OpenAI deployment URLs). */
  OPENAI_CHAT_API_VERSION?: string;
  /**
   * JSON array of models served by openai-chat (`shared/models/configured.ts`); an entry may
   * add `chat`, its host's wire options (`shared/providers/openai-chat/models.ts`).
   */
  SPINDLE_OPENAI_CHAT_MODELS?: string;
  /**
   * The Workers AI binding (`[ai] binding = "AI"`): with it, the `workers-ai` provider serves the
   * models of `SPINDLE_WORKERS_AI_MODELS`. Not in the default configuration: the binding has no
   * local simulation, so `npm start` and the tests would reach the account.
   */
  AI?: Ai;
  /** JSON array of Workers AI models (`@cf/…` names as `model`), entries as openai-chat's. */
  SPINDLE_WORKERS_AI_MODELS?: string;
  /** An AI Gateway id the Workers AI binding's requests go through (its cache is skipped). */
  SPINDLE_WORKERS_AI_GATEWAY?: string;
}
