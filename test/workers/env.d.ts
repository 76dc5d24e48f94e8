// Types `cloudflare:workers`'s `env` and `exports` for the workerd suites (what `wrangler types`
// would generate for the test worker, `test/workers/wrangler.toml`).
type SpindleEnv = import("../../env.ts").Env;
type TestWorker = typeof import("./worker.ts");

declare namespace Cloudflare {
  interface Env extends Omit<SpindleEnv, "THREAD"> {
    THREAD: DurableObjectNamespace<import("./worker.ts").TestThread>;
    /** Test only: how many requests the API fuzz test sends (vitest.workers.config.ts). */
    SPINDLE_FUZZ_RUNS?: string;
  }
  interface GlobalProps {
    mainModule: TestWorker;
    durableNamespaces: "TestThread" | "Tenant" | "TenantDirectory";
  }
}
