/**
 * `cloudflare:workers` for the Node suites: the worker's modules import the objects' face
 * (`durable-objects/index.ts`), so the object classes are defined there; these suites never
 * construct one (the workerd suites do).
 */
export class DurableObject<Env = unknown> {
  protected readonly ctx: unknown;
  protected readonly env: Env;

  constructor(ctx: unknown, env: Env) {
    this.ctx = ctx;
    this.env = env;
  }
}
