import type { TruncationPolicy } from "../../../shared/context-manager/index.ts";
import { ContextManager } from "../../../shared/context-manager/index.ts";
import type {
  ContentItem,
  CustomToolCallItem,
  CustomToolCallOutputItem,
  FunctionCallItem,
  FunctionCallOutputItem,
  LocalShellCallItem,
  MessageItem,
  ReasoningItem,
  ResponseItem,
  ToolOutput,
} from "../../../shared/protocol/index.ts";

/** The catalog's default recording policy (reference §7: "Tokens(10000) unless stated"). */
export const DEFAULT_POLICY: TruncationPolicy = { mode: "tokens", limit: 10_000 };

export function user(text: string): MessageItem {
  return { type: "message", role: "user", content: [{ type: "input_text", text }] };
}

export function assistant(text: string): MessageItem {
  return { type: "message", role: "assistant", content: [{ type: "output_text", text }] };
}

export function developer(...texts: string[]): MessageItem {
  return {
    type: "message",
    role: "developer",
    content: texts.map((text) => ({ type: "input_text" as const, text })),
  };
}

export function system(text: string): MessageItem {
  return { type: "message", role: "system", content: [{ type: "input_text", text }] };
}

export function message(role: MessageItem["role"], content: ContentItem[]): MessageItem {
  return { type: "message", role, content };
}

export function image(url: string, detail?: "auto" | "low" | "high" | "original") {
  return detail === undefined
    ? { type: "input_image" as const, image_url: url }
    : { type: "input_image" as const, image_url: url, detail };
}

export function functionCall(callId: string, id?: string): FunctionCallItem {
  const item: FunctionCallItem = {
    type: "function_call",
    name: "exec_command",
    arguments: '{"cmd":"ls"}',
    call_id: callId,
  };
  return id === undefined ? item : { ...item, id };
}

export function functionOutput(callId: string, output: ToolOutput = "ok"): FunctionCallOutputItem {
  return { type: "function_call_output", call_id: callId, output };
}

export function customCall(callId: string, id?: string): CustomToolCallItem {
  const item: CustomToolCallItem = {
    type: "custom_tool_call",
    call_id: callId,
    name: "apply_patch",
    input: "*** Begin Patch",
  };
  return id === undefined ? item : { ...item, id };
}

export function customOutput(callId: string, output: ToolOutput = "ok"): CustomToolCallOutputItem {
  return { type: "custom_tool_call_output", call_id: callId, output };
}

export function localShellCall(callId: string | null, id?: string): LocalShellCallItem {
  const item: LocalShellCallItem = {
    type: "local_shell_call",
    call_id: callId,
    status: "completed",
    action: { type: "exec", command: ["echo", "hi"] },
  };
  return id === undefined ? item : { ...item, id };
}

export function reasoning(encrypted?: string): ReasoningItem {
  return {
    type: "reasoning",
    summary: [{ type: "summary_text", text: "thinking" }],
    content: null,
    encrypted_content: encrypted ?? null,
  };
}

export function other(originalType = "ghost_snapshot"): ResponseItem {
  return { type: "other", original_type: originalType };
}

/** A JSON-serialized inter-agent communication, as an assistant message (reference §1.3). */
export function interAgent(content: string): MessageItem {
  const text = JSON.stringify({
    author: "/root",
    recipient: "/root/worker",
    other_recipients: [],
    content,
    trigger_turn: true,
  });
  return assistant(text);
}

export const ENV_CONTEXT = "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>";
export const PERMISSIONS = "<permissions instructions>\nsandbox text\n</permissions instructions>";

export function historyWith(items: ResponseItem[]): ContextManager {
  const cm = new ContextManager();
  cm.recordItems(items, DEFAULT_POLICY);
  return cm;
}

/** A deep copy to compare against later (items are frozen, but the test should not rely on it). */
export function snapshot<T>(value: T): T {
  return structuredClone(value);
}
