/**
 * The current-time reminder (Codex's `core/tests/suite/current_time_reminder.rs`): a developer
 * message with the time before the first model request, then every N requests, kept in
 * history, and sent afresh after a compaction starts a new window.
 */
import { describe, expect, it } from "vitest";
import type { Prompt } from "../../../shared/protocol/index.ts";
import { drain, ManualClock, newSession, replayed, runTurn } from "../helpers/engine.ts";

/** 2026-06-17 17:34:15 UTC */
const FIRST = Date.UTC(2026, 5, 17, 17, 34, 15);

function reminders(prompt: Prompt | undefined): string[] {
  return (prompt?.input ?? []).flatMap((item) =>
    item.type === "message" && item.role === "developer"
      ? item.content.flatMap((p) =>
          p.type === "input_text" && p.text.startsWith("<current_time>") ? [p.text] : [],
        )
      : [],
  );
}

const at = (time: string) => `<current_time>\nThe time is now ${time} UTC.\n</current_time>`;

function session(interval: number) {
  const clock = new ManualClock(FIRST);
  const h = newSession(
    { current_time_reminder: { reminder_interval_model_requests: interval } },
    1000,
    { clock },
  );
  return { h, clock };
}

describe("the current-time reminder", () => {
  it("follows the request interval and stays in history", async () => {
    const { h, clock } = session(2);
    for (const input of ["first turn", "second turn", "third turn"]) {
      await runTurn(h, input);
      clock.ms += 60_000;
    }
    expect(h.client.prompts.map(reminders)).toEqual([
      [at("2026-06-17 17:34:15")],
      [at("2026-06-17 17:34:15")],
      [at("2026-06-17 17:34:15"), at("2026-06-17 17:36:15")],
    ]);
  });

  it("is refreshed after a compaction, and a thread rebuilt from its rollout decides alike", async () => {
    const { h, clock } = session(50);
    await runTurn(h, "before compact");
    await drain(h.session.compact());
    clock.ms += 60_000;
    const rebuilt = replayed(h);
    await runTurn(rebuilt, "after compact");
    expect(reminders(rebuilt.client.prompts.at(-1))).toEqual([at("2026-06-17 17:35:15")]);
    clock.ms += 60_000;
    await runTurn(replayed(rebuilt), "and on");
    expect(reminders(rebuilt.client.prompts.at(-1))).toEqual([at("2026-06-17 17:35:15")]);
  });

  it("is off by default and after current_time_reminder: null", async () => {
    const h = newSession();
    await runTurn(h, "one");
    const { h: on } = session(1);
    await runTurn(on, "one");
    await drain(
      on.session.runTurn(
        { content: [{ type: "input_text", text: "two" }] },
        {
          current_time_reminder: null,
        },
      ),
    );
    expect([reminders(h.client.prompts[0]), reminders(on.client.prompts.at(-1)).length]).toEqual([
      [],
      1,
    ]);
  });
});
