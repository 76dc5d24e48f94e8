/** Thread storage helpers the durability suites share: inspection, damaged segments, evictions. */
import { evictDurableObject, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import type { TestThread } from "../worker.ts";
import { api, json, newThreadId, threadStub } from "./api.ts";

export type Inspect = Awaited<ReturnType<TestThread["inspectForTesting"]>>;
export const inspect = async (id: string) => (await threadStub(id).inspectForTesting()) as Inspect;

export async function createThread(id: string, config: Record<string, unknown> = {}) {
  return json(await api("POST", "/v1/threads", { id, ...config }), 201);
}

export async function turn(id: string, input: string, overrides?: Record<string, unknown>) {
  return json<{
    id: string;
    status: string;
    items: { type: string; role?: string; content?: { text?: string }[] }[];
  }>(await api("POST", `/v1/threads/${id}/turns`, { input, ...(overrides ? { overrides } : {}) }));
}

export const prompt = async (id: string) => (await api("GET", `/v1/threads/${id}/prompt`)).text();

export type TurnItem = { role?: string; content?: { text?: string }[] };
/** The developer message and the `<…>` user fragments a turn records as context. */
export const isContextItem = (i: TurnItem) =>
  i.role === "developer" || (i.role === "user" && i.content?.[0]?.text?.startsWith("<") === true);

/** A thread with two turns, each flushed to its own R2 segment, the second one then damaged. */
export async function threadWithDamagedSecondSegment(): Promise<string> {
  const id = newThreadId();
  await createThread(id, { cwd: "/repo" });
  for (const input of ["one", "two"]) {
    await turn(id, input);
    await runDurableObjectAlarm(threadStub(id));
  }
  expect(await segmentsOf(id)).toHaveLength(2);
  await corruptSegment(id, 1);
  return id;
}

export const segmentsOf = async (id: string) =>
  (await env.ROLLOUT.list({ prefix: `threads/local/${id}/segments/`, include: ["customMetadata"] }))
    .objects;

/** Rewrites the thread's `index`-th R2 segment (from 0) with other bytes under the same metadata. */
export async function corruptSegment(id: string, index: number): Promise<void> {
  const second = (await segmentsOf(id))[index];
  if (!second) throw new Error(`no segment ${index}`);
  // Same key and metadata, different bytes: the checksum no longer matches.
  const garbage = new Response(
    new Blob([
      '{"timestamp":"t","type":"event_msg","payload":{"type":"user_message","message":"forged"}}\n',
    ])
      .stream()
      .pipeThrough(new CompressionStream("gzip")),
  );
  await env.ROLLOUT.put(second.key, await garbage.arrayBuffer(), {
    customMetadata: second.customMetadata ?? {},
  });
}

/**
 * Evicts the thread (after `meanwhile`, e.g. a change to its storage) and checks that the next
 * prompt and the engine state it reloads are identical to what they were.
 */
export async function expectSameAfterEviction(id: string, meanwhile?: () => Promise<unknown>) {
  const before = await prompt(id);
  const state = await inspect(id);
  await meanwhile?.();
  await evictDurableObject(threadStub(id));
  expect(await prompt(id)).toBe(before);
  expect(await inspect(id)).toEqual(state);
}
