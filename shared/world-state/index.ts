/**
 * World state (design §4, reference §3): ordered sections with stable ids, JSON snapshots,
 * RFC 7386 merge patches between snapshots, and diff renderers that turn a change of state
 * into context fragments. The built-in sections live in `sections/` and stay private.
 */
export { buildWorldState, type WorldStateInput } from "./build.ts";
export { compareCodePoints, jsonEqual } from "./internal/json.ts";
export { applyMergePatch, mergePatchFrom, removeNullObjectFields } from "./merge-patch.ts";
export { SECTION_IDS } from "./section-ids.ts";
export { CODEX_SHARD_IDS as CODEX_AGENTS_MD_SHARD_IDS } from "./sections/agents-md.ts";
export { pathOf } from "./sections/environments.ts";
export { hasNetworkAccess } from "./sections/permissions.ts";
export { type PreviousSectionState, WorldState, type WorldStateSection } from "./world-state.ts";
