/**
 * The inspector's pure part: what an item is (context section, tool call, synthetic output),
 * which items of a request are new, the SSE framing. No DOM, so the unit tests import it as it
 * is served (test/unit/inspector/).
 */

/**
 * Marker prefixes of the context fragments → the world-state section that writes them (design
 * §4). Kept in step with `MARKERS` and `CONTEXTUAL_DEVELOPER_PREFIXES` (shared/context/markers.ts)
 * by a unit test: a marker the server gains must get a label here. `section` is the section id
 * (shared/world-state/section-ids.ts), or null for fragments no section writes.
 */
export const CONTEXT_PREFIXES = [
  { prefix: "<model_switch>", section: "model", label: "Model" },
  { prefix: "<permissions instructions>", section: "permissions", label: "Permissions" },
  { prefix: "<collaboration_mode>", section: "collaboration_mode", label: "Collaboration mode" },
  { prefix: "<personality_spec>", section: "personality", label: "Personality" },
  { prefix: "# AGENTS.md instructions", section: "agents_md", label: "AGENTS.md" },
  { prefix: "<user_instructions>", section: "agents_md", label: "AGENTS.md (legacy)" },
  { prefix: "<environment_context>", section: "environments", label: "Environment" },
  { prefix: "<extension_context", section: "context_sections", label: "Custom section" },
  { prefix: "<external_", section: "additional_context", label: "Additional context" },
  { prefix: "<turn_aborted>", section: null, label: "Turn aborted" },
  { prefix: "<current_time>", section: null, label: "Current time" },
  { prefix: "<skill", section: null, label: "Skill" },
  { prefix: "<skills_instructions>", section: null, label: "Skills" },
  { prefix: "<user_shell_command>", section: null, label: "Shell command" },
  { prefix: "<subagent_notification>", section: null, label: "Subagent" },
  { prefix: "<goal_context>", section: null, label: "Goal (legacy)" },
  { prefix: "<realtime_conversation>", section: null, label: "Realtime" },
  { prefix: "<token_budget>", section: null, label: "Token budget" },
  { prefix: "<multi_agent_mode>", section: null, label: "Multi-agent" },
  { prefix: "<apps_instructions>", section: null, label: "Apps" },
  { prefix: "<plugins_instructions>", section: null, label: "Plugins" },
  { prefix: "<environments_instructions>", section: null, label: "Environments" },
  { prefix: "<context_window>", section: null, label: "Context window" },
  { prefix: "<context_window_guidance>", section: null, label: "Context window" },
  { prefix: "<rollout_budget>", section: null, label: "Rollout budget" },
];

/** The output the prompt gives a call that history holds no output for (context-manager). */
export const ABORTED_OUTPUT = "aborted";

/** The texts of a message's text parts. */
export function textsOf(item) {
  if (!item || !Array.isArray(item.content)) return [];
  return item.content.filter((p) => typeof p?.text === "string").map((p) => p.text);
}

/**
 * The context fragment entry of a user or developer message (the first part that starts with a
 * marker, after leading whitespace, ASCII case-insensitive as the server matches), or null.
 */
export function contextSectionOf(item) {
  if (item?.type !== "message" || (item.role !== "user" && item.role !== "developer")) return null;
  for (const text of textsOf(item)) {
    const head = text.trimStart().toLowerCase();
    // Longest prefix first, so `<context_window_guidance>` is not read as `<context_window>`.
    const match = [...CONTEXT_PREFIXES]
      .sort((a, b) => b.prefix.length - a.prefix.length)
      .find((entry) => head.startsWith(entry.prefix.toLowerCase()));
    if (match) return match;
  }
  return null;
}

/** The index of a request's first new item: everything before it was in the previous request. */
export function firstNewIndex(request) {
  const reused = request?.cache?.reused_prefix_items;
  const count = Array.isArray(request?.input) ? request.input.length : 0;
  return typeof reused === "number" && reused >= 0 ? Math.min(reused, count) : 0;
}

const CALL_TYPES = new Set(["function_call", "custom_tool_call", "local_shell_call"]);
const OUTPUT_TYPES = new Set(["function_call_output", "custom_tool_call_output"]);

export const isToolCall = (item) => CALL_TYPES.has(item?.type);
export const isToolOutput = (item) => OUTPUT_TYPES.has(item?.type);

/**
 * Tool calls paired with their outputs by `call_id`, in the calls' order: `{call, output}` with
 * `output` null when none is in `items`; outputs with no call in `items` come as `{call: null}`.
 */
export function pairToolCalls(items) {
  const pairs = [];
  const byCallId = new Map();
  for (const item of items) {
    if (isToolCall(item)) {
      const pair = { call: item, output: null };
      pairs.push(pair);
      if (typeof item.call_id === "string") byCallId.set(item.call_id, pair);
    } else if (isToolOutput(item)) {
      const pair = byCallId.get(item.call_id);
      if (pair && pair.output === null) pair.output = item;
      else pairs.push({ call: null, output: item });
    }
  }
  return pairs;
}

/** The plain text of a tool output (a string, or its text parts joined). */
export function outputText(output) {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) {
    return output.map((p) => (typeof p?.text === "string" ? p.text : `[${p?.type}]`)).join("\n");
  }
  return JSON.stringify(output);
}

/**
 * A prompt output the server made up for a call history has no output for (a paused turn
 * abandoned, an interrupted call): its text is `aborted` and no rollout line `recorded` (the
 * call ids whose outputs the rollout holds) has it.
 */
export function isSyntheticOutput(item, recorded) {
  return (
    isToolOutput(item) && outputText(item.output) === ABORTED_OUTPUT && !recorded.has(item.call_id)
  );
}

/** The call ids of the `response_item` outputs among rollout lines `{seq, line}`. */
export function recordedOutputIds(lines) {
  const ids = new Set();
  for (const { line } of lines) {
    if (line?.type === "response_item" && isToolOutput(line.payload)) ids.add(line.payload.call_id);
  }
  return ids;
}

/**
 * The world-state lines that produced request `index`'s context diff: those after the previous
 * request's line and before this one's.
 */
export function worldStateLinesFor(requests, index, lines) {
  const after = index > 0 ? (requests[index - 1]?.seq ?? -1) : -1;
  const before = requests[index]?.seq ?? Number.POSITIVE_INFINITY;
  return lines.filter(
    ({ seq, line }) => line?.type === "world_state" && seq > after && seq < before,
  );
}

/** Server-side tool calls (MCP) of rollout lines, by call id: server, tool, duration, approval. */
export function serverToolCalls(lines) {
  const calls = new Map();
  const entry = (callId) => {
    let call = calls.get(callId);
    if (!call) {
      call = {
        call_id: callId,
        server: null,
        tool: null,
        duration_ms: null,
        success: null,
        approval: null,
      };
      calls.set(callId, call);
    }
    return call;
  };
  for (const { line } of lines) {
    if (line?.type !== "event_msg") continue;
    const p = line.payload ?? {};
    if (p.type === "mcp_tool_call_begin" || p.type === "mcp_tool_call_end") {
      const call = entry(p.call_id);
      call.server = p.invocation?.server ?? call.server;
      call.tool = p.invocation?.tool ?? call.tool;
      if (p.type === "mcp_tool_call_end") {
        call.duration_ms = p.duration_ms ?? null;
        call.success = p.success;
      }
    } else if (p.type === "mcp_approval_request") {
      const call = entry(p.call_id);
      call.server ??= p.server_label;
      call.tool ??= p.name;
      call.approval = "requested";
    }
  }
  return calls;
}

/** One line of an item for lists: its kind and a short text. */
export function summarize(item, max = 160) {
  let text;
  if (item?.type === "message") text = textsOf(item).join(" ");
  else if (isToolCall(item))
    text = `${item.name ?? item.type}(${item.arguments ?? item.input ?? ""})`;
  else if (isToolOutput(item)) text = outputText(item.output);
  else if (item?.type === "reasoning") text = (item.summary ?? []).map((s) => s.text).join(" ");
  else text = JSON.stringify(item);
  text = String(text).replace(/\s+/g, " ").trim();
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/**
 * An SSE decoder: feed it text chunks, get the complete events `{id, event, data}` (data
 * parsed as JSON when it is). Comments (keep-alives) and incomplete events are held back.
 */
export function sseDecoder() {
  let buffer = "";
  return (chunk) => {
    buffer += chunk.replace(/\r\n?/g, "\n");
    const events = [];
    let end = buffer.indexOf("\n\n");
    while (end !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { id: null, event: "message", data: "" };
      const data = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") data.push(value);
        else if (field === "id") event.id = value;
        else if (field === "event") event.event = value;
      }
      if (data.length > 0) {
        event.data = data.join("\n");
        try {
          event.data = JSON.parse(event.data);
        } catch {
          // Not JSON: kept as text.
        }
        events.push(event);
      }
      end = buffer.indexOf("\n\n");
    }
    return events;
  };
}

/** Parses the thread search box: `key=value` pairs (space separated) become metadata filters. */
export function parseMetadataFilter(text) {
  const filters = [];
  for (const part of text.split(/\s+/).filter(Boolean)) {
    const eq = part.indexOf("=");
    if (eq <= 0) return { error: `“${part}” is not key=value` };
    filters.push([part.slice(0, eq), part.slice(eq + 1)]);
  }
  return { filters };
}

/** A compact token count: 1234 → "1.2k". */
export function tokens(n) {
  if (typeof n !== "number") return "–";
  if (n >= 1_000_000) return `${(n / 1_000_000).toFixed(1)}M`;
  if (n >= 10_000) return `${Math.round(n / 1000)}k`;
  if (n >= 1000) return `${(n / 1000).toFixed(1)}k`;
  return String(n);
}

/** A turn summary's `rollback_before.turns` in words: "Rolled back 2 turns". */
export const rollbackText = (turns) => `Rolled back ${turns} ${turns === 1 ? "turn" : "turns"}`;
