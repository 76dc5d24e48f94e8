/**
 * Creates, forks and imports sent several times at once to the same thread: under one
 * `Idempotency-Key` they make one thread and every attempt gets the same answer; under one `id`
 * without a key, one makes it and the others are told it exists. None is a 500.
 */
import { describe, expect, it } from "vitest";
import { api, importRollout, json, newThreadId } from "../helpers/api.ts";
import { checkThreadRollout } from "../helpers/rollout.ts";
import { tenantWithKey } from "../helpers/tenancy.ts";

interface Answer {
  status: number;
  body: unknown;
  location: string | null;
}

const answerOf = async (res: Response): Promise<Answer> => ({
  status: res.status,
  body: JSON.parse(await res.text()),
  location: res.headers.get("location"),
});

/** `count` copies of a request sent at once, their answers in order. */
const atOnce = (count: number, send: () => Promise<Response>): Promise<Answer[]> =>
  Promise.all(Array.from({ length: count }, () => send().then(answerOf)));

/** A tenant of its own with room for `max_threads` threads. */
async function tenantWithRoom(maxThreads: number) {
  const { tenant, key } = await tenantWithKey({ quotas: { max_threads: maxThreads } });
  return { tenant: tenant.id, key };
}

/** A tenant of its own with room for `max_threads` threads, and a thread with one turn. */
async function tenantWithThread(maxThreads: number) {
  const { tenant, key } = await tenantWithRoom(maxThreads);
  const source = newThreadId();
  await json(await api("POST", "/v1/threads", { id: source }, key), 201);
  await json(await api("POST", `/v1/threads/${source}/turns`, { input: "one" }, key));
  const rollout = await (await api("GET", `/v1/threads/${source}/rollout`, undefined, key)).text();
  return { tenant, key, source, rollout };
}

/** The thread's stored rollout lines, each seq once; one `session_meta` if one request made it. */
async function rolloutOf(tenant: string, id: string): Promise<string[]> {
  const check = await checkThreadRollout(id, tenant);
  expect(check.errors).toEqual([]);
  return check.lines;
}

/** The thread's rollout, written once: its lines, one `session_meta` among them. */
async function expectWrittenOnce(tenant: string, id: string): Promise<string[]> {
  const lines = await rolloutOf(tenant, id);
  expect(lines.filter((line) => line.includes('"type":"session_meta"'))).toHaveLength(1);
  return lines;
}

/** Every answer the same 201, and the thread it names made once. */
async function expectOneThread(tenant: string, answers: Answer[]): Promise<string> {
  const [first] = answers;
  if (first === undefined) throw new Error("no answer");
  expect(first.status).toBe(201);
  for (const answer of answers) expect(answer).toEqual(first);
  const { id } = first.body as { id: string };
  await expectWrittenOnce(tenant, id);
  return id;
}

/** One 201, every other answer a 409 `thread_exists`, and the thread made once. */
async function expectOneCreated(tenant: string, id: string, answers: Answer[]): Promise<void> {
  expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
  for (const answer of answers.filter((a) => a.status !== 201)) {
    expect(answer.status).toBe(409);
    expect(answer.body).toMatchObject({ code: "thread_exists" });
  }
  await expectWrittenOnce(tenant, id);
}

/** The tenant has `left` places for threads: that many more creates pass, the next is refused. */
async function expectRoomFor(key: string, left: number): Promise<void> {
  for (let i = 0; i < left; i++) {
    await json(await api("POST", "/v1/threads", {}, key), 201);
  }
  const refused = await api("POST", "/v1/threads", {}, key);
  expect(await json(refused, 429)).toMatchObject({ code: "quota_exceeded", quota: "max_threads" });
}

describe.each([5, 10])("%i identical requests at once", (count) => {
  it("keyed creates without an id make one thread and answer alike", async () => {
    const { tenant, key } = await tenantWithRoom(2);
    const body = { cwd: "/repo", metadata: { run: "a" } };
    const send = () => api("POST", "/v1/threads", body, key, { "idempotency-key": "create-1" });
    const answers = await atOnce(count, send);
    await expectOneThread(tenant, answers);
    // Later retries get the same answer, and the thread took one place.
    expect(await atOnce(2, send)).toEqual(answers.slice(0, 2));
    await expectRoomFor(key, 1);
  });

  it("keyed creates with an id make one thread and answer alike", async () => {
    const { tenant, key } = await tenantWithRoom(2);
    const id = newThreadId();
    const send = () => api("POST", "/v1/threads", { id }, key, { "idempotency-key": "create-2" });
    expect(await expectOneThread(tenant, await atOnce(count, send))).toBe(id);
    await expectRoomFor(key, 1);
  });

  it("creates with an id and no key make one thread; the others are thread_exists", async () => {
    const { tenant, key } = await tenantWithRoom(2);
    const id = newThreadId();
    await expectOneCreated(
      tenant,
      id,
      await atOnce(count, () => api("POST", "/v1/threads", { id }, key)),
    );
    await expectRoomFor(key, 1);
  });

  it("keyed forks without an id make one fork and answer alike", async () => {
    const { tenant, key, source } = await tenantWithThread(3);
    const send = () =>
      api("POST", `/v1/threads/${source}/fork`, {}, key, { "idempotency-key": "fork-1" });
    const answers = await atOnce(count, send);
    const id = await expectOneThread(tenant, answers);
    expect(answers[0]?.body).toMatchObject({ forked_from: source, turn_count: 1 });
    expect(await rolloutOf(tenant, id)).toHaveLength((await rolloutOf(tenant, source)).length);
    expect(await atOnce(2, send)).toEqual(answers.slice(0, 2));
    await expectRoomFor(key, 1);
  });

  it("keyed forks with an id make one fork and answer alike", async () => {
    const { tenant, key, source } = await tenantWithThread(3);
    const id = newThreadId();
    const send = () =>
      api("POST", `/v1/threads/${source}/fork`, { id }, key, { "idempotency-key": "fork-2" });
    expect(await expectOneThread(tenant, await atOnce(count, send))).toBe(id);
    await expectRoomFor(key, 1);
  });

  it("forks with an id and no key make one fork; the others are thread_exists", async () => {
    const { tenant, key, source } = await tenantWithThread(3);
    const id = newThreadId();
    await expectOneCreated(
      tenant,
      id,
      await atOnce(count, () => api("POST", `/v1/threads/${source}/fork`, { id }, key)),
    );
    expect(await rolloutOf(tenant, id)).toHaveLength((await rolloutOf(tenant, source)).length);
    await expectRoomFor(key, 1);
  });

  it("keyed imports without an id make one thread and answer alike", async () => {
    const { tenant, key, rollout } = await tenantWithThread(3);
    const send = () =>
      importRollout(undefined, rollout, { "idempotency-key": "import-1" }, { key });
    const answers = await atOnce(count, send);
    await expectOneThread(tenant, answers);
    expect(answers[0]?.body).toMatchObject({ turn_count: 1 });
    expect(await atOnce(2, send)).toEqual(answers.slice(0, 2));
    await expectRoomFor(key, 1);
  });

  it("keyed imports with an id make one thread and answer alike", async () => {
    const { tenant, key, rollout } = await tenantWithThread(3);
    const id = newThreadId();
    const send = () => importRollout(id, rollout, { "idempotency-key": "import-2" }, { key });
    expect(await expectOneThread(tenant, await atOnce(count, send))).toBe(id);
    await expectRoomFor(key, 1);
  });

  it("imports with an id and no key make one thread; the others are thread_exists", async () => {
    const { tenant, key, rollout } = await tenantWithThread(3);
    const id = newThreadId();
    await expectOneCreated(
      tenant,
      id,
      await atOnce(count, () => importRollout(id, rollout, {}, { key })),
    );
    await expectRoomFor(key, 1);
  });
});
