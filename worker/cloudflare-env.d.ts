// Types the `cloudflare:workers` env/exports for this project (what `wrangler types` would generate).
type SpindleEnv = import("./env.ts").Env;
type SpindleMain = typeof import("./index.ts");

declare namespace Cloudflare {
  interface Env extends SpindleEnv {}
  interface GlobalProps {
    mainModule: SpindleMain;
    durableNamespaces: "Thread";
  }
}
