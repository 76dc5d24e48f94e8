/**
 * Context benchmarks of the pure engine (no runtime): prefix stability over a scripted 200-turn
 * session with periodic cwd / AGENTS.md / model changes and two compactions, and the bytes of
 * context each kind of change adds compared with re-sending the full context.
 * Numbers are printed, never asserted.
 */
import { ContextManager } from "../shared/context-manager/index.ts";
import { DEFAULT_MODEL_CATALOG, DEFAULT_MODEL_SLUG } from "../shared/models/index.ts";
import { fixedClock, sequentialIds } from "../shared/ports/index.ts";
import type { Prompt, ThreadConfig } from "../shared/protocol/index.ts";
import { LocalModelClient } from "../shared/providers/index.ts";
import {
  buildTurnContext,
  captureStepContext,
  type EngineDeps,
  MemoryRolloutSink,
  modelVisiblePrompt,
  recordContextUpdates,
  resolveSessionConfiguration,
  ThreadSession,
} from "../shared/session/index.ts";

const TURNS = 200;
/** Manual compactions run before these turns. */
const COMPACT_AT = new Set([80, 160]);

function session(config: ThreadConfig, prompts: Prompt[]) {
  const local = new LocalModelClient();
  const deps: EngineDeps = {
    clock: fixedClock(Date.UTC(2026, 2, 1), 60_000),
    ids: sequentialIds("b"),
    catalog: DEFAULT_MODEL_CATALOG,
    defaultModel: DEFAULT_MODEL_SLUG,
    modelClient: () => ({
      stream(prompt, signal) {
        prompts.push(modelVisiblePrompt(prompt));
        return local.stream(prompt, signal);
      },
    }),
    sink: new MemoryRolloutSink(),
  };
  return ThreadSession.create(config, deps);
}

async function drain<T>(gen: AsyncGenerator<unknown, T>): Promise<T> {
  for (;;) {
    const next = await gen.next();
    if (next.done) return next.value;
  }
}

function overridesFor(turn: number): ThreadConfig | undefined {
  if (turn % 10 === 3) return { cwd: `/repo/pkg${turn}` };
  if (turn % 25 === 7)
    return {
      agents_md: { directory: "/repo", text: `Rule set ${turn}: run the tests before committing.` },
    };
  if (turn % 40 === 20) return { model: turn % 80 === 20 ? "spindle-local-lite" : "spindle-local" };
  return undefined;
}

async function prefixStability(): Promise<void> {
  const prompts: Prompt[] = [];
  const s = session(
    { cwd: "/repo", agents_md: { directory: "/repo", text: "Run the tests before committing." } },
    prompts,
  );
  /** Index (in `prompts`) of the first prompt after each compaction. */
  const restarts = new Set<number>();
  for (let t = 0; t < TURNS; t++) {
    if (COMPACT_AT.has(t)) {
      await drain(s.compact("manual"));
      restarts.add(prompts.length);
    }
    const version = s.history.historyVersion;
    const before = prompts.length;
    const input = {
      content: [{ type: "input_text" as const, text: `turn ${t}: do the next step` }],
    };
    await drain(s.runTurn(input, overridesFor(t)));
    // An automatic compaction (the lite model's small window) also rewrites history.
    if (s.history.historyVersion !== version && !COMPACT_AT.has(t))
      restarts.add(prompts.length - 1);
    if (prompts.length === before) throw new Error("a turn sent no prompt");
  }
  const summarization = (p: Prompt) => JSON.stringify(p.input.at(-1)).includes("handoff note");
  // The user turns' prompts, each marked when a compaction came right before it.
  const turns = prompts.flatMap((p, i) =>
    summarization(p) ? [] : [{ prompt: p, restart: restarts.has(i) }],
  );
  let pairs = 0;
  let prefixes = 0;
  let excluded = 0;
  for (let i = 0; i + 1 < turns.length; i++) {
    const a = turns[i];
    const b = turns[i + 1];
    if (!a || !b) continue;
    if (b.restart) {
      excluded++;
      continue;
    }
    pairs++;
    if (JSON.stringify(b.prompt.input).startsWith(JSON.stringify(a.prompt.input).slice(0, -1))) {
      prefixes++;
    }
  }
  console.log(
    `prefix stability over ${TURNS} turns (manual compactions before turns ${[...COMPACT_AT].join(", ")}; cwd changes every 10 turns, AGENTS.md every 25, model every 40):`,
  );
  console.log(`  consecutive prompt pairs outside compactions: ${pairs}`);
  console.log(
    `  earlier input a byte-prefix of the next: ${prefixes} (${((100 * prefixes) / Math.max(pairs, 1)).toFixed(1)}%)`,
  );
  console.log(`  pairs across a compaction (excluded): ${excluded}`);
}

function contextBytes(): void {
  const base: ThreadConfig = {
    cwd: "/repo",
    agents_md: {
      directory: "/repo",
      text: "Run the tests before committing. Keep functions small. Prefer clear names.".repeat(4),
    },
    developer_instructions: "Answer in English.",
    personality: "pragmatic",
    context_sections: { ticket: { role: "user", text: "Ticket 42: the login page times out." } },
  };
  const changes: [string, ThreadConfig][] = [
    ["cwd", { cwd: "/repo/sub" }],
    ["AGENTS.md", { agents_md: { directory: "/repo", text: "New rules: lint before pushing." } }],
    ["model", { model: "spindle-local-lite" }],
    [
      "permissions",
      {
        permissions: {
          sandbox: "read-only",
          approval_policy: "never",
          writable_roots: [],
          network_access: false,
        },
      },
    ],
    [
      "custom section",
      {
        context_sections: {
          ticket: { role: "user", text: "Ticket 43: the logout button is hidden." },
        },
      },
    ],
    ["nothing", {}],
  ];
  const measure = (
    history: ContextManager,
    config: ThreadConfig,
    id: string,
    previousModel?: string,
  ) => {
    const resolved = resolveSessionConfiguration(
      undefined,
      config,
      DEFAULT_MODEL_CATALOG,
      DEFAULT_MODEL_SLUG,
    );
    const model = DEFAULT_MODEL_CATALOG.get(resolved.model);
    if (!model) throw new Error("model");
    const now = Date.UTC(2026, 2, 1);
    const turn = buildTurnContext(id, resolved, model, now);
    const result = recordContextUpdates(
      history,
      turn,
      captureStepContext(turn, now, previousModel),
      new MemoryRolloutSink(),
    );
    return result.items.reduce((n, item) => n + JSON.stringify(item).length, 0);
  };
  const fullHistory = new ContextManager();
  const full = measure(fullHistory, base, "t0");
  console.log(`\ncontext bytes per change (full initial context: ${full} bytes):`);
  for (const [name, change] of changes) {
    const history = new ContextManager();
    measure(history, base, "t0");
    const merged = { ...base, ...change };
    const diff = measure(history, merged, "t1", "spindle-local");
    console.log(
      `  ${name.padEnd(15)} ${String(diff).padStart(6)} bytes  (${((100 * diff) / full).toFixed(1)}% of re-sending the full context)`,
    );
  }
}

await prefixStability();
contextBytes();
