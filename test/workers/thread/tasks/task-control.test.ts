import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { AlarmSchedule } from "../../../../durable-objects/common/alarms.ts";
import { systemClock } from "../../../../durable-objects/common/clock.ts";
import { LiveThread, storagePartsOf } from "../../../../durable-objects/thread/live-thread.ts";
import { turnResource } from "../../../../durable-objects/thread/resources.ts";
import { EventLog } from "../../../../durable-objects/thread/storage/event-log.ts";
import type { MetaStore } from "../../../../durable-objects/thread/storage/meta-store.ts";
import { decodeTolerantly } from "../../../../durable-objects/thread/storage/rollout-log.ts";
import { TaskControl } from "../../../../durable-objects/thread/tasks/task-control.ts";
import { TurnQueue } from "../../../../durable-objects/thread/tasks/turn-queue.ts";
import {
  FLUSH_DELAY_MS,
  RUNNING_TASK_ALARM_MS,
} from "../../../../durable-objects/thread/upkeep.ts";
import type { Env } from "../../../../env.ts";
import type { StartTurnRequest, TurnResource } from "../../../../shared/api/index.ts";
import type { ResponseItem } from "../../../../shared/protocol/index.ts";
import { newThreadId, threadStub } from "../../helpers/api.ts";

/** The test worker's environment as the production code types it (its THREAD is typed here). */
const spindleEnv = env as unknown as Env;

interface Setup {
  threadId: string;
  live: LiveThread;
  tasks: TaskControl;
  meta: MetaStore;
  events: EventLog;
  queue: TurnQueue;
  /** Alarm times the schedule asked for, relative to when it asked. */
  alarmsSet: number[];
  /** Waits for everything handed to `waitUntil` so far, and what that work handed on. */
  idle: () => Promise<void>;
}

/**
 * Runs `body` with a TaskControl over a new thread in a fresh object: real stores over its SQLite
 * and R2. The alarm schedule is real too, over a storage that records the alarms instead of
 * setting them: a real alarm would wake the object's own Thread, which would load this thread and
 * settle the turn the test is running.
 */
function withTasks<T>(body: (setup: Setup) => Promise<T>): Promise<T> {
  const threadId = newThreadId();
  return runInDurableObject(threadStub(threadId), async (_instance, state) => {
    const parts = storagePartsOf(state, spindleEnv);
    const live = LiveThread.create(parts, { tenant: "local", threadId, config: {} }, () => {});
    const events = new EventLog(parts.sql, systemClock);
    const queue = new TurnQueue(parts.sql);
    const alarmsSet: number[] = [];
    let stored: number | null = null;
    const alarms = new AlarmSchedule(
      {
        getAlarm: async () => stored,
        setAlarm: async (at) => {
          alarmsSet.push(Number(at) - Date.now());
          stored = Number(at);
        },
        deleteAlarm: async () => {
          stored = null;
        },
      },
      systemClock,
    );
    const waited: Promise<unknown>[] = [];
    const tasks = new TaskControl({
      meta: parts.meta,
      events,
      queue,
      alarms,
      load: async () => live,
      afterTask: async () => {},
      halted: () => false,
      waitUntil: (work) => {
        waited.push(work);
      },
      quotas: {
        taskStart: () => undefined,
        steerStart: () => undefined,
        taskStarted: () => {},
        taskEnded: () => {},
      },
      taskChanged: () => {},
    });
    const idle = async () => {
      for (let seen = -1; seen !== waited.length; ) {
        seen = waited.length;
        await Promise.allSettled(waited);
      }
    };
    try {
      return await body({
        threadId,
        live,
        tasks,
        meta: parts.meta,
        events,
        queue,
        alarmsSet,
        idle,
      });
    } finally {
      // Nothing of the test may run on after the callback returns.
      tasks.running?.controller.abort(new Error("test over"));
      await idle();
    }
  });
}

const turnRequest = (
  text: string,
  onBusy: StartTurnRequest["onBusy"] = "reject",
  expectedTurnId?: string,
): StartTurnRequest => ({
  content: [{ type: "input_text", text }],
  onBusy,
  ...(expectedTurnId ? { expectedTurnId } : {}),
});

/** The user and assistant messages of a turn's items, as `role: text`. */
function messages(items: readonly ResponseItem[]): string[] {
  return items.flatMap((item) =>
    item.type === "message" && (item.role === "user" || item.role === "assistant")
      ? [
          `${item.role}: ${item.content.map((p) => ("text" in p ? p.text : `[${p.type}]`)).join("")}`,
        ]
      : [],
  );
}

/** A resource with its items as messages and its usage left out (estimated by the model). */
const shape = (resource: TurnResource) => ({
  ...resource,
  items: messages(resource.items).filter((m) => !m.startsWith("user: <")),
  usage: resource.usage === null ? null : "usage",
});

/** Starts a slow turn and resolves once it runs. */
async function startSlow(setup: Setup, turnId: string, text = "/slow 300 take your time") {
  const admitted = await setup.tasks.acceptTurn(setup.live, turnRequest(text), turnId);
  if (!admitted.ok || !admitted.value.task)
    throw new Error(`not started: ${JSON.stringify(admitted)}`);
  return admitted.value.task;
}

describe("TaskControl: one task at a time", () => {
  it("a turn admitted with nothing running starts, completes, and is no longer running", async () => {
    const result = await withTasks(async (setup) => {
      const admitted = await setup.tasks.acceptTurn(setup.live, turnRequest("hello"), "turn_a");
      if (!admitted.ok || !admitted.value.task) throw new Error("not started");
      const runningAtStart = setup.tasks.running?.turnId;
      const done = await admitted.value.task.done;
      return {
        threadId: setup.threadId,
        runningAtStart,
        done: shape(done),
        runningAfter: setup.tasks.running,
        row: setup.meta.turn("turn_a")?.status,
        alarmsSet: setup.alarmsSet,
      };
    });
    expect(result).toEqual({
      threadId: result.threadId,
      runningAtStart: "turn_a",
      done: {
        object: "turn",
        id: "turn_a",
        thread_id: result.threadId,
        kind: "turn",
        status: "completed",
        items: [
          "user: hello",
          expect.stringMatching(
            /^assistant: Received \d+ input items\. Last user message: "hello"$/,
          ),
        ],
        pending_calls: [],
        usage: "usage",
        error: null,
      },
      runningAfter: undefined,
      row: "completed",
      // The running task's watch: the alarm stays due while it runs.
      alarmsSet: [expect.closeTo(RUNNING_TASK_ALARM_MS, -3)],
    });
  });

  it("while a turn runs, a turn that asks to be rejected is thread_busy and starts nothing", async () => {
    const result = await withTasks(async (setup) => {
      const slow = await startSlow(setup, "turn_slow");
      const rejected = await setup.tasks.acceptTurn(setup.live, turnRequest("me too"), "turn_b");
      const busy = setup.tasks.busy();
      setup.tasks.running?.controller.abort(new Error("done with it"));
      await slow.done;
      return { rejected, busy, row: setup.meta.turn("turn_b"), queued: setup.queue.has("turn_b") };
    });
    const threadBusy = {
      ok: false,
      error: { code: "thread_busy", detail: "Turn turn_slow is running." },
    };
    expect(result).toEqual({
      rejected: threadBusy,
      busy: threadBusy,
      row: undefined,
      queued: false,
    });
  });

  it("while a turn runs, a queued turn waits in the queue and runs once the first one ends", async () => {
    const result = await withTasks(async (setup) => {
      const slow = await startSlow(setup, "turn_slow", "/slow 100 take your time");
      const queued = await setup.tasks.acceptTurn(
        setup.live,
        turnRequest("after you", "queue"),
        "turn_q",
      );
      const whileRunning = {
        queued: setup.queue.has("turn_q"),
        row: setup.meta.turn("turn_q"),
        alarmsSet: [...setup.alarmsSet],
      };
      const first = await slow.done;
      await setup.idle();
      const second = setup.meta.turn("turn_q");
      const resource = second && (await turnResource(setup.live, second));
      return {
        queued,
        whileRunning,
        first: first.status,
        second: second?.status,
        secondItems: resource && messages(resource.items).filter((m) => !m.startsWith("user: <")),
        queuedAfter: setup.queue.has("turn_q"),
        running: setup.tasks.running,
      };
    });
    expect(result).toEqual({
      queued: { ok: true, value: { queued: "turn_q" } },
      whileRunning: {
        queued: true,
        row: undefined,
        // The running task's watch, then a soon one: a queue left behind by an eviction drains.
        alarmsSet: [expect.closeTo(RUNNING_TASK_ALARM_MS, -3), expect.closeTo(FLUSH_DELAY_MS, -3)],
      },
      first: "completed",
      second: "completed",
      secondItems: [
        "user: after you",
        expect.stringMatching(
          /^assistant: Received \d+ input items\. Last user message: "after you"$/,
        ),
      ],
      queuedAfter: false,
      running: undefined,
    });
  });

  it("steering into a turn that is not the running one is turn_mismatch, and joins nothing", async () => {
    const result = await withTasks(async (setup) => {
      const slow = await startSlow(setup, "turn_slow");
      const mismatch = await setup.tasks.acceptTurn(
        setup.live,
        turnRequest("join me", "steer", "turn_other"),
        "turn_other",
      );
      setup.tasks.running?.controller.abort(new Error("done with it"));
      const done = await slow.done;
      return { mismatch, users: messages(done.items).filter((m) => /^user: [^<]/.test(m)) };
    });
    expect(result).toEqual({
      mismatch: {
        ok: false,
        error: { code: "turn_mismatch", detail: "The running turn is turn_slow." },
      },
      users: ["user: /slow 300 take your time"],
    });
  });

  it("steering into the running turn joins its input to that turn", async () => {
    const result = await withTasks(async (setup) => {
      const slow = await startSlow(setup, "turn_slow", "/slow 40 take your time");
      const steered = await setup.tasks.acceptTurn(
        setup.live,
        turnRequest("and also this", "steer", "turn_slow"),
        "turn_slow",
      );
      const done = await slow.done;
      return {
        steeredTask: steered.ok && steered.value.task === slow,
        status: done.status,
        users: messages(done.items).filter((m) => !m.startsWith("user: <")),
      };
    });
    expect(result).toEqual({
      steeredTask: true,
      status: "completed",
      users: [
        "user: /slow 40 take your time",
        expect.stringMatching(/^assistant: /),
        "user: and also this",
        expect.stringMatching(/^assistant: .*"and also this"$/),
      ],
    });
  });

  it("a new turn that interrupts ends the running one as interrupted, then starts", async () => {
    const result = await withTasks(async (setup) => {
      const slow = await startSlow(setup, "turn_slow");
      const admitted = await setup.tasks.acceptTurn(
        setup.live,
        turnRequest("instead", "interrupt"),
        "turn_new",
      );
      const first = await slow.done;
      const second = admitted.ok ? await admitted.value.task?.done : undefined;
      return {
        first: first.status,
        second: second?.status,
        rows: [setup.meta.turn("turn_slow")?.status, setup.meta.turn("turn_new")?.status],
      };
    });
    expect(result).toEqual({
      first: "interrupted",
      second: "completed",
      rows: ["interrupted", "completed"],
    });
  });

  it("interrupting a queued turn removes it from the queue: it never runs, its stream ends, its row says so", async () => {
    const result = await withTasks(async (setup) => {
      const slow = await startSlow(setup, "turn_slow");
      await setup.tasks.acceptTurn(setup.live, turnRequest("later", "queue"), "turn_q");
      // What a streamed request for the queued turn follows.
      const stream = setup.events.subscribe(setup.events.lastSeq, "turn_q");
      let flushed = 0;
      const interrupted = await setup.tasks.interrupt(setup.live, "turn_q", async () => {
        flushed += 1;
      });
      const streamed = await new Response(stream).text();
      setup.tasks.running?.controller.abort(new Error("done with it"));
      await slow.done;
      await setup.idle();
      return {
        interrupted,
        flushed,
        queued: setup.queue.has("turn_q"),
        row: setup.meta.turn("turn_q"),
        streamed: streamed
          .trim()
          .split("\n")
          .map((l) => (JSON.parse(l) as { type: string; turn_id: string }).type),
        running: setup.tasks.running,
      };
    });
    expect(result).toEqual({
      interrupted: {
        ok: true,
        value: {
          object: "turn",
          id: "turn_q",
          thread_id: expect.stringMatching(/^t_/),
          kind: "turn",
          status: "interrupted",
          items: [],
          pending_calls: [],
          usage: null,
          error: null,
        },
      },
      flushed: 0,
      queued: false,
      row: {
        id: "turn_q",
        ordinal: 0,
        kind: "turn",
        status: "interrupted",
        first_seq: expect.any(Number),
        last_seq: expect.any(Number),
        pending_calls: [],
        usage: null,
        error: null,
      },
      streamed: ["turn.interrupted"],
      running: undefined,
    });
  });

  it("interrupting the running turn answers it ended as interrupted", async () => {
    const result = await withTasks(async (setup) => {
      await startSlow(setup, "turn_slow");
      const interrupted = await setup.tasks.interrupt(setup.live, "turn_slow", async () => {});
      return interrupted.ok
        ? { status: interrupted.value.status, row: setup.meta.turn("turn_slow")?.status }
        : interrupted;
    });
    expect(result).toEqual({ status: "interrupted", row: "interrupted" });
  });

  it("interrupting a turn the thread does not have is turn_not_found", async () => {
    const result = await withTasks((setup) =>
      setup.tasks.interrupt(setup.live, "turn_nope", async () => {}),
    );
    expect(result).toEqual({
      ok: false,
      error: { code: "turn_not_found", detail: 'No turn "turn_nope" in this thread.' },
    });
  });
});

describe("TaskControl.settleInterruptedTurn: a turn cut short by the instance going away", () => {
  it("ends the in_progress turn as interrupted with a turn_aborted line, and moves updated_at", async () => {
    const result = await withTasks(async ({ live, meta, tasks }) => {
      // What an instance leaves behind when it goes away mid-turn: the turn's first lines and
      // its row, still in progress.
      live.log.append({
        type: "event_msg",
        payload: { type: "task_started", turn_id: "turn_cut" },
      });
      const firstSeq = live.log.lastSeq;
      live.log.append({
        type: "response_item",
        payload: { type: "message", role: "user", content: [{ type: "input_text", text: "hi" }] },
      });
      const row = {
        id: "turn_cut",
        ordinal: firstSeq,
        kind: "turn" as const,
        status: "in_progress" as const,
        first_seq: firstSeq,
        last_seq: live.log.lastSeq,
        pending_calls: [],
        usage: null,
        error: null,
      };
      meta.putTurn(row);
      const settled = tasks.settleInterruptedTurn(live);
      const lastLine = decodeTolerantly(live.log.rawAfter(live.log.lastSeq - 1)).lines[0];
      return {
        settled,
        row: meta.turn("turn_cut"),
        expectedRow: { ...row, status: "interrupted", last_seq: firstSeq + 2 },
        lastLine: lastLine && { type: lastLine.type, payload: lastLine.payload },
        updatedAt: meta.thread()?.updated_at,
        lastWrittenAt: lastLine?.timestamp,
        again: tasks.settleInterruptedTurn(live),
        lastSeqAfterAgain: live.log.lastSeq,
      };
    });
    expect(result).toEqual({
      settled: true,
      row: result.expectedRow,
      expectedRow: result.expectedRow,
      lastLine: {
        type: "event_msg",
        payload: {
          type: "turn_aborted",
          turn_id: "turn_cut",
          reason: "interrupted",
          completed_at: expect.any(Number),
        },
      },
      updatedAt: result.lastWrittenAt,
      lastWrittenAt: expect.any(String),
      // Settled once: the turn has ended, nothing more is written.
      again: false,
      lastSeqAfterAgain: result.expectedRow.last_seq,
    });
  });

  it("leaves a thread whose last turn ended alone", async () => {
    const result = await withTasks(async (setup) => {
      const admitted = await setup.tasks.acceptTurn(setup.live, turnRequest("hello"), "turn_a");
      if (admitted.ok) await admitted.value.task?.done;
      const before = { seq: setup.live.log.lastSeq, row: setup.meta.turn("turn_a") };
      const settled = setup.tasks.settleInterruptedTurn(setup.live);
      return {
        settled,
        same: before.seq === setup.live.log.lastSeq,
        row: setup.meta.turn("turn_a")?.status,
      };
    });
    expect(result).toEqual({ settled: false, same: true, row: "completed" });
  });

  it("a thread without turns has nothing to settle", async () => {
    const result = await withTasks(async ({ tasks, live }) => tasks.settleInterruptedTurn(live));
    expect(result).toBe(false);
  });
});
