/**
 * The provider requests of a thread, rebuilt from its rollout for the inspector (design §13),
 * and the cache report that compares each with the one before it (design §14), from the rollout
 * or live as the thread sends them.
 */
export {
  type Between,
  type ComparedRequest,
  cacheReport,
  comparedRequest,
} from "./cache-report.ts";
export {
  CacheTracker,
  type RememberedRequest,
  type RequestHead,
  type RequestMemory,
  type RunMark,
} from "./cache-tracker.ts";
export { newestRequest, type ReplayOptions, type SeqLine, turnRequests } from "./replay.ts";
