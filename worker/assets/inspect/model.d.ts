// Types of model.js for the unit tests that import it (not served: .assetsignore).
export interface ContextPrefix {
  prefix: string;
  section: string | null;
  label: string;
}
export const CONTEXT_PREFIXES: ContextPrefix[];
export const ABORTED_OUTPUT: string;
export interface ToolItem {
  type: string;
  call_id?: string;
  name?: string;
  output?: unknown;
}
export interface RolloutLineAt {
  seq: number;
  line: unknown;
}
export interface ServerToolCall {
  call_id: string;
  server: string | null;
  tool: string | null;
  duration_ms: number | null;
  success: boolean | null;
  approval: string | null;
}
export function textsOf(item: unknown): string[];
export function contextSectionOf(item: unknown): ContextPrefix | null;
export function firstNewIndex(request: unknown): number;
export function isToolCall(item: unknown): boolean;
export function isToolOutput(item: unknown): boolean;
export function pairToolCalls(
  items: unknown[],
): { call: ToolItem | null; output: ToolItem | null }[];
export function outputText(output: unknown): string;
export function isSyntheticOutput(item: unknown, recorded: Set<string>): boolean;
export function recordedOutputIds(lines: RolloutLineAt[]): Set<string>;
export function worldStateLinesFor(
  requests: { seq: number }[],
  index: number,
  lines: RolloutLineAt[],
): RolloutLineAt[];
export function serverToolCalls(lines: RolloutLineAt[]): Map<string, ServerToolCall>;
export function summarize(item: unknown, max?: number): string;
export function sseDecoder(): (
  chunk: string,
) => { id: string | null; event: string; data: unknown }[];
export function parseMetadataFilter(text: string): { filters?: [string, string][]; error?: string };
export function tokens(n: unknown): string;
export function rollbackText(turns: number): string;
