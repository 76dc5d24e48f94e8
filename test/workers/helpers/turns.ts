/** Small readers and requests over the thread API that the thread suites share. */
import { api, DEV_KEY, json, post, type SseFrame } from "./api.ts";

export interface Item {
  type: string;
  role?: string;
  id?: string;
  call_id?: string;
  name?: string;
  output?: unknown;
  content?: { type: string; text?: string }[];
}
export interface Turn {
  id: string;
  status: string;
  items: Item[];
  pending_calls: Item[];
  error: { code: string; message: string } | null;
}
export interface Prompt {
  instructions: string;
  input: Item[];
}

export const text = (item: Item | undefined) =>
  item?.content?.map((p) => p.text ?? "").join("") ?? "";
export const isContext = (i: Item) =>
  i.role === "developer" || (i.role === "user" && /^(<|# AGENTS)/.test(text(i)));

export async function createThread(id: string, config: Record<string, unknown> = {}) {
  return json(await post("/v1/threads", { id, ...config }), 201);
}
export async function turn(
  id: string,
  input: string,
  extra: Record<string, unknown> = {},
  status = 200,
) {
  return json<Turn>(await post(`/v1/threads/${id}/turns`, { input, ...extra }), status);
}
export async function prompt(id: string): Promise<Prompt> {
  return json<Prompt>(await api("GET", `/v1/threads/${id}/prompt`));
}
export const promptText = async (id: string) =>
  (await api("GET", `/v1/threads/${id}/prompt`)).text();
/** The input array's JSON without its closing bracket: a byte-prefix check on prompts. */
export const openInput = (p: Prompt) => JSON.stringify(p.input).slice(0, -1);
export const events = (frames: SseFrame[]) => frames.map((f) => f.event);
export const until = (type: string) => (frames: SseFrame[]) => frames.some((f) => f.event === type);
export const waitFor = async (check: () => Promise<boolean>) => {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error("condition not reached");
};
export const untilTurnStatus = (id: string, turnId: string, status: string) =>
  waitFor(
    async () =>
      (await json<Turn>(await api("GET", `/v1/threads/${id}/turns/${turnId}`))).status === status,
  );

/** A GET with the dev key and extra headers (e.g. Last-Event-ID). */
export const getWith = (path: string, headers: Record<string, string>) =>
  api("GET", path, undefined, DEV_KEY, headers);
