/**
 * The provider requests of a thread, rebuilt from its rollout for the inspector (design §13),
 * and the cache report that compares each with the one before it (design §14).
 */
export {
  type Between,
  type ComparedRequest,
  cacheReport,
  comparedRequest,
} from "./cache-report.ts";
export { type ReplayOptions, type SeqLine, turnRequests } from "./replay.ts";
