import {
  type Fragment,
  type FragmentRole,
  fragment,
  renderFragment,
} from "../../../shared/context/index.ts";
import type { JsonValue, MessageItem, PermissionsConfig } from "../../../shared/protocol/index.ts";
import type { WorldStateInput } from "../../../shared/world-state/index.ts";

export function user(text: string): MessageItem {
  return { type: "message", role: "user", content: [{ type: "input_text", text }] };
}

export function developer(text: string): MessageItem {
  return { type: "message", role: "developer", content: [{ type: "input_text", text }] };
}

export function assistant(text: string): MessageItem {
  return { type: "message", role: "assistant", content: [{ type: "output_text", text }] };
}

/** `{role, text}` of each fragment, for comparing whole renders. */
export function texts(fragments: readonly Fragment[]): { role: FragmentRole; text: string }[] {
  return fragments.map((f) => ({ role: f.role, text: renderFragment(f) }));
}

export function frag(role: FragmentRole, start: string, end: string, body: string): Fragment {
  return fragment(role, start, end, body);
}

export const workspaceWrite: PermissionsConfig = {
  sandbox: "workspace-write",
  approval_policy: "on-request",
  writable_roots: [],
  network_access: false,
};

/** A complete input with every optional part unset; tests override what they exercise. */
export function input(overrides: Partial<WorldStateInput> = {}): WorldStateInput {
  return {
    model: { slug: "spindle-local", instructions: "You are Spindle's local model." },
    permissions: workspaceWrite,
    environments: [{ id: "local", cwd: "/repo", shell: "bash" }],
    currentDate: "2026-01-02",
    timezone: "UTC",
    contextSections: {},
    ...overrides,
  };
}

/** Persisting goes through JSON text, so tests read snapshots back the same way. */
export function roundTrip<T extends JsonValue>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}
