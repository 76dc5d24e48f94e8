import type { Thread } from "../durable-objects/thread.ts";

/** Bindings declared in wrangler.toml. */
export interface Env {
  THREAD: DurableObjectNamespace<Thread>;
  ROLLOUT: R2Bucket;
  SPINDLE_ENV?: string;
  SPINDLE_API_KEYS?: string;
  /** Lines between checkpoints (default 250); tests lower it to exercise checkpoints. */
  SPINDLE_CHECKPOINT_EVERY_LINES?: string;
  /** History items per stored checkpoint group (default 250); tests lower it too. */
  SPINDLE_CHECKPOINT_GROUP_ITEMS?: string;
  /** The openai provider: API root (default https://api.openai.com/v1) and key (a secret). */
  OPENAI_BASE_URL?: string;
  OPENAI_API_KEY?: string;
  /** JSON array of models served by the openai provider (`shared/models/configured.ts`). */
  SPINDLE_OPENAI_MODELS?: string;
}
