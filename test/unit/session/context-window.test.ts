import { describe, expect, it } from "vitest";
import {
  DEFAULT_MODEL_CATALOG,
  DEFAULT_MODEL_SLUG,
  SPINDLE_LOCAL,
  SPINDLE_LOCAL_LITE,
} from "../../../shared/models/index.ts";
import type { ThreadConfig } from "../../../shared/protocol/index.ts";
import {
  assertContextFits,
  ContextWindowExceededError,
  resolveSessionConfiguration,
} from "../../../shared/session/index.ts";
import { drain, newSession, runTurn, text, textOfTokens } from "../helpers/engine.ts";

const LITE = { model: SPINDLE_LOCAL_LITE.slug };

describe("an input that cannot fit the context window", () => {
  it("is refused before anything is recorded when it alone exceeds the model's window", async () => {
    const h = newSession(LITE);
    await runTurn(h, "hello");
    const before = { items: [...h.sink.items], history: h.session.history.toState() };
    const huge = text(textOfTokens(SPINDLE_LOCAL_LITE.contextWindowTokens));
    await expect(drain(h.session.runTurn(huge))).rejects.toBeInstanceOf(ContextWindowExceededError);
    expect(h.sink.items).toEqual(before.items);
    expect(h.session.history.toState()).toEqual(before.history);
  });

  it("counts the base instructions and the full initial context, not the input alone", async () => {
    const h = newSession(LITE);
    // Fits alone, but not with the AGENTS.md text every first turn (and every turn after a
    // compaction) must carry.
    const agents = {
      directory: "/repo",
      text: textOfTokens(SPINDLE_LOCAL_LITE.contextWindowTokens / 2),
    };
    const input = text(textOfTokens(SPINDLE_LOCAL_LITE.contextWindowTokens / 2));
    const error = await drain(h.session.runTurn(input, { agents_md: agents })).catch((e) => e);
    expect(error).toBeInstanceOf(ContextWindowExceededError);
    expect((error as ContextWindowExceededError).windowTokens).toBe(
      SPINDLE_LOCAL_LITE.contextWindowTokens,
    );
  });

  it("leaves the configuration as it was when the turn's overrides are refused with it", async () => {
    const h = newSession({});
    const huge = text(textOfTokens(SPINDLE_LOCAL_LITE.contextWindowTokens));
    await expect(drain(h.session.runTurn(huge, LITE))).rejects.toBeInstanceOf(
      ContextWindowExceededError,
    );
    expect(h.session.state.config.model).toBe(SPINDLE_LOCAL.slug);
  });

  it("runs after an automatic compaction when only the history was too long", async () => {
    const h = newSession(LITE);
    for (let i = 0; i < 8; i++) await runTurn(h, textOfTokens(1_800));
    const outcome = await runTurn(h, textOfTokens(1_800));
    expect(outcome.status).toBe("completed");
    expect(h.sink.items.filter((i) => i.type === "compacted").length).toBeGreaterThan(0);
  });
});

describe("assertContextFits: a configuration that could take no turn", () => {
  const resolved = (config: ThreadConfig) =>
    resolveSessionConfiguration(undefined, config, DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG);

  it("refuses instructions and context that alone exceed the window, with no input at all", () => {
    const config = resolved({
      ...LITE,
      base_instructions: textOfTokens(SPINDLE_LOCAL_LITE.contextWindowTokens + 10),
    });
    const error = (() => {
      try {
        assertContextFits(config, SPINDLE_LOCAL_LITE, 0, undefined);
      } catch (err) {
        return err;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ContextWindowExceededError);
    expect((error as ContextWindowExceededError).windowTokens).toBe(16_000);
  });

  it("takes a configuration that leaves room, and counts a turn's input when given one", () => {
    const config = resolved({ ...LITE, base_instructions: textOfTokens(8_000) });
    expect(() => assertContextFits(config, SPINDLE_LOCAL_LITE, 0, undefined)).not.toThrow();
    const input = [{ type: "input_text" as const, text: textOfTokens(8_100) }];
    expect(() => assertContextFits(config, SPINDLE_LOCAL_LITE, 0, undefined, input)).toThrow(
      ContextWindowExceededError,
    );
  });
});
