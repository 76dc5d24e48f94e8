import type { ServerTool } from "../mcp/index.ts";
import type {
  FunctionCallItem,
  McpApprovalRequest,
  McpServerRef,
  ToolOutput,
} from "../protocol/index.ts";
import type { TaskScope, TurnEvent } from "./task-scope.ts";
import type { StepContext, TurnContext } from "./turn-context.ts";

/**
 * The server side of a step's tools (design §16): the MCP tools joined to the step's capture, and
 * the calls the model makes of them run here, each recorded as Codex records one (`function_call`
 * then `function_call_output`), with an `mcp_tool_call_begin` line written before it is sent.
 */

/** A model call of a server tool, and the tool it calls. */
export interface ServerCall {
  readonly call: FunctionCallItem;
  readonly tool: Pick<ServerTool, "label" | "tool">;
}

/** How the model's calls of one step split: run here, held for approval, or left to the client. */
export interface SplitCalls {
  readonly run: ServerCall[];
  readonly approvals: { call: FunctionCallItem; request: McpApprovalRequest }[];
  readonly client: FunctionCallItem[];
}

/** Whether the turn's steps reach MCP servers (without, a step is captured as it always was). */
export function usesServerTools(scope: TaskScope, turn: TurnContext): boolean {
  return (turn.config.mcp_servers?.length ?? 0) > 0 && scope.deps.serverTools !== undefined;
}

/**
 * Adds the MCP tools of `refs` to a step's capture (client tools first, their names win), and
 * reports each new warning once per turn (`warned` holds the ones already reported): a line in
 * the rollout and a `turn.warning` event. A step without servers is returned as it is.
 */
export async function* withServerTools(
  scope: TaskScope,
  turn: TurnContext,
  step: StepContext,
  warned: Set<string>,
  signal: AbortSignal | undefined,
): AsyncGenerator<TurnEvent, StepContext> {
  const refs = turn.config.mcp_servers ?? [];
  const port = scope.deps.serverTools;
  if (refs.length === 0 || port === undefined) return step;
  const capture = await port.capture(refs, step.tools, signal);
  // An interrupt during the listing: the loop ends the turn; its failures are not the servers'.
  if (signal?.aborted) return step;
  for (const warning of capture.warnings) {
    const key = JSON.stringify([warning.code, warning.server_label, warning.message]);
    if (warned.has(key)) continue;
    warned.add(key);
    scope.deps.sink.append({ type: "event_msg", payload: { type: "warning", ...warning } });
    yield { type: "turn.warning", turn_id: turn.turnId, warning };
  }
  if (capture.tools.length === 0) return step;
  return Object.freeze({
    ...step,
    tools: [...step.tools, ...capture.tools.map((t) => t.spec)],
    serverTools: capture.tools,
  });
}

/** Splits the model's calls by who runs them; the approval requests get their ids here. */
export function splitCalls(
  scope: TaskScope,
  calls: readonly FunctionCallItem[],
  step: StepContext,
): SplitCalls {
  const byName = new Map(step.serverTools.map((t) => [t.spec.name, t]));
  const split: SplitCalls = { run: [], approvals: [], client: [] };
  for (const call of calls) {
    const tool = byName.get(call.name);
    if (tool === undefined) split.client.push(call);
    else if (!tool.requireApproval) split.run.push({ call, tool });
    else {
      const request: McpApprovalRequest = {
        type: "mcp_approval_request",
        id: `mcpr_${scope.deps.ids.uuidv7()}`,
        server_label: tool.label,
        name: tool.tool,
        arguments: call.arguments,
        call_id: call.call_id,
      };
      split.approvals.push({ call, request });
    }
  }
  return split;
}

/** Records the approval requests a paused turn waits on (a turn row is rebuilt from these lines). */
export function recordApprovalRequests(
  scope: TaskScope,
  requests: readonly McpApprovalRequest[],
): void {
  for (const { type, ...request } of requests) {
    scope.deps.sink.append({ type: "event_msg", payload: { type, ...request } });
  }
}

/**
 * Runs server calls concurrently and records each output as it arrives (so an eviction loses
 * only the calls still running, which are then answered `aborted`, never sent again). Each
 * call's `mcp_tool_call_begin` line is written before any is sent: a Durable Object holds an
 * outgoing request until the writes before it are durable, so a call that reached its server is
 * always on record. An abort of `signal` cancels the calls still running; they get no output.
 */
export async function* runServerCalls(
  scope: TaskScope,
  turn: TurnContext,
  calls: readonly ServerCall[],
  signal: AbortSignal | undefined,
): AsyncGenerator<TurnEvent, void> {
  const port = scope.deps.serverTools;
  if (calls.length === 0) return;
  const { sink, clock } = scope.deps;
  const refs: readonly McpServerRef[] = turn.config.mcp_servers ?? [];
  const controller = new AbortController();
  const abort = () => controller.abort(signal?.reason);
  signal?.addEventListener("abort", abort, { once: true });
  try {
    const running = new Map<string, Promise<Finished>>();
    for (const { call, tool } of calls) {
      const invocation = { server: tool.label, tool: tool.tool, arguments: argumentsValue(call) };
      sink.append({
        type: "event_msg",
        payload: { type: "mcp_tool_call_begin", call_id: call.call_id, invocation },
      });
      const startedAt = clock.nowMs();
      const args = argumentsObject(call);
      const outcome: Promise<{ output: ToolOutput; success: boolean }> =
        typeof args === "string"
          ? Promise.resolve({ output: args, success: false })
          : port
            ? port.call(refs, tool, args, controller.signal)
            : Promise.resolve({ output: "No MCP server is connected.", success: false });
      running.set(
        call.call_id,
        outcome.then(
          (result) => ({ call, invocation, startedAt, result }),
          (err: unknown) => ({ call, invocation, startedAt, error: err }),
        ),
      );
    }
    while (running.size > 0) {
      const done = await Promise.race(running.values());
      running.delete(done.call.call_id);
      if (controller.signal.aborted) continue;
      const result =
        "result" in done
          ? done.result
          : { output: `The MCP tool call failed: ${errorText(done.error)}`, success: false };
      sink.append({
        type: "event_msg",
        payload: {
          type: "mcp_tool_call_end",
          call_id: done.call.call_id,
          invocation: done.invocation,
          duration_ms: Math.max(0, clock.nowMs() - done.startedAt),
          success: result.success,
        },
      });
      const item = scope.record(
        { type: "function_call_output", call_id: done.call.call_id, output: result.output },
        turn,
      );
      yield { type: "item.completed", turn_id: turn.turnId, item, context: false };
    }
  } finally {
    signal?.removeEventListener("abort", abort);
  }
}

type Finished = {
  call: FunctionCallItem;
  invocation: { server: string; tool: string; arguments: unknown };
  startedAt: number;
} & ({ result: { output: ToolOutput; success: boolean } } | { error: unknown });

/** What the model sent as the call's arguments, parsed when it is JSON (for the begin line). */
function argumentsValue(call: FunctionCallItem): unknown {
  try {
    return JSON.parse(call.arguments);
  } catch {
    return call.arguments;
  }
}

/** The arguments as `tools/call` takes them (an object; empty text is none), or why not. */
function argumentsObject(call: FunctionCallItem): Record<string, unknown> | string {
  if (call.arguments.trim() === "") return {};
  const value = argumentsValue(call);
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    return value as Record<string, unknown>;
  }
  return `The arguments of ${call.name} must be a JSON object; the call was not sent.`;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** What the model is told of a call a person did not approve (its `function_call_output`). */
export function deniedOutput(request: McpApprovalRequest, reason: string | undefined): string {
  const why = reason === undefined || reason.trim() === "" ? "" : ` Reason given: ${reason.trim()}`;
  return `The user did not approve this call of ${request.name} on MCP server "${request.server_label}"; it was not run.${why}`;
}
