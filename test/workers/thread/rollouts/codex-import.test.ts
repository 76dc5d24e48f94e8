/**
 * Codex rollouts of every shape, through the HTTP API: imported, configured, run (the first
 * turn's prompt is what the local model receives), exported and restored.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import {
  CODEX_FIXTURES,
  type CodexFixture,
  DEFAULT_CONFIG,
  jsonl,
  LEGACY_ROLLOUT,
  paginatedFork,
} from "../../../fixtures/codex-rollouts.ts";
import { api, importRollout, json, newThreadId, threadStub } from "../../helpers/api.ts";

interface Thread {
  config: Record<string, unknown> & { environments: { cwd: string }[]; timezone: string };
  turn_count: number;
  forked_from: string | null;
  imported_from: unknown;
  warnings: unknown[];
}
interface Item {
  type: string;
  role?: string;
  content?: { text?: string }[];
}

const textsOf = (items: readonly Item[]) =>
  items.flatMap((item) => (item.content ?? []).map((part) => part.text ?? ""));

/** The last thing the texts say of each setting: what the model takes to be in force. */
function newestStatements(texts: readonly string[]) {
  const last = (pattern: RegExp) => {
    const all = texts.flatMap((t) => [...t.matchAll(pattern)].map((m) => m[1]));
    return all.at(-1) ?? null;
  };
  return {
    cwd: last(/<cwd>([^<]*)<\/cwd>/g),
    timezone: last(/<timezone>([^<]*)<\/timezone>/g),
    sandbox: last(/Sandbox mode: `([^`]+)`/g),
    approval: last(/Approval policy: `([^`]+)`/g),
  };
}

async function importFixture(fixture: Pick<CodexFixture, "lines">, parent?: string) {
  const id = newThreadId();
  const res = await importRollout(id, jsonl(fixture.lines), {}, { parent });
  return { id, thread: await json<Thread>(res, 201) };
}

describe("importing a Codex rollout of each shape", () => {
  for (const fixture of CODEX_FIXTURES) {
    it(`${fixture.name} (${fixture.versions}): import → config → first turn → export → restore`, async () => {
      const { id, thread } = await importFixture(fixture);
      const config = { ...DEFAULT_CONFIG, ...fixture.expected.config };
      expect(thread).toMatchObject({
        config,
        turn_count: fixture.expected.turnCount,
        forked_from: null,
        imported_from: fixture.expected.importedFrom,
        warnings: fixture.expected.warnings,
      });

      // History holds conversation items only.
      const imported = await json<{ data: Item[] }>(
        await api("GET", `/v1/threads/${id}/history?limit=1000`),
      );
      expect(imported.data.filter((item) => item.type === "other")).toEqual([]);

      const previewed = await json<{ input: Item[] }>(await api("GET", `/v1/threads/${id}/prompt`));
      // The first turn: the model switch leads when the last turn ran on another model, and
      // the newest cwd, timezone, sandbox and approval policy the model reads are the thread's.
      const turn = await json<{ status: string; items: Item[] }>(
        await api("POST", `/v1/threads/${id}/turns`, { input: "carry on" }),
      );
      expect(turn.status).toBe("completed");
      const first = turn.items[0];
      const switched =
        first?.role === "developer"
          ? /^<model_switch>\nUntil now this conversation ran on a different model \(([^)]+)\)/.exec(
              first.content?.[0]?.text ?? "",
            )?.[1]
          : undefined;
      const prompt = await json<{ input: Item[] }>(await api("GET", `/v1/threads/${id}/prompt`));
      const primary = config.environments[0];
      // A quiet resume restates no setting: the permissions the model read are Codex's text.
      const quiet = fixture.expected.quietResume === true;
      expect({
        switchedFrom: switched ?? null,
        said: newestStatements(textsOf(prompt.input)),
        restated: textsOf(turn.items).filter(
          (t) => t.startsWith("<permissions instructions>") || t.startsWith("# AGENTS.md"),
        ).length,
      }).toEqual({
        switchedFrom: fixture.expected.switchedFrom,
        said: {
          cwd: primary?.cwd ?? null,
          timezone: config.timezone,
          sandbox: quiet ? null : config.permissions.sandbox,
          approval: quiet ? null : config.permissions.approval_policy,
        },
        restated: quiet ? 0 : expect.any(Number),
      });
      // The prompt before the turn, then exactly what the turn recorded: nothing the preview
      // did not show was sent.
      expect(textsOf(prompt.input)).toEqual([...textsOf(previewed.input), ...textsOf(turn.items)]);

      // Export: Spindle's session_meta, the upload's other lines byte for byte, the
      // configuration the import resolved, then the turn.
      const exported = (await (await api("GET", `/v1/threads/${id}/rollout`)).text()).split("\n");
      const uploaded = jsonl(fixture.lines).split("\n").slice(0, -1);
      expect(exported.slice(1, uploaded.length)).toEqual(uploaded.slice(1));
      const appended = JSON.parse(exported[uploaded.length] ?? "{}") as Record<string, unknown>;
      expect(appended).toMatchObject({ type: "spindle_config", payload: config });

      // Restore from R2: the same thread.
      await runDurableObjectAlarm(threadStub(id));
      const before = await json<Thread>(await api("GET", `/v1/threads/${id}`));
      const restored = await json<Thread>(await api("POST", `/v1/threads/${id}/restore`));
      expect(restored).toEqual(before);
    });
  }

  it("keeps where a thread came from through export and re-import, and reports no fork", async () => {
    const fixture = CODEX_FIXTURES.find((f) => f.name.startsWith("0.95"));
    if (!fixture) throw new Error("no 0.95 fixture");
    const { id } = await importFixture(fixture);
    const exported = await (await api("GET", `/v1/threads/${id}/rollout`)).text();
    const copy = newThreadId();
    const again = await json<Thread>(await importRollout(copy, exported), 201);
    expect(again).toMatchObject({
      forked_from: null,
      imported_from: fixture.expected.importedFrom,
      config: { ...DEFAULT_CONFIG, ...fixture.expected.config },
      warnings: fixture.expected.warnings,
    });
    // Every line of the export is kept: its configuration line holds the configuration.
    const reexported = await (await api("GET", `/v1/threads/${copy}/rollout`)).text();
    expect(reexported.split("\n").slice(1)).toEqual(exported.split("\n").slice(1));
    await runDurableObjectAlarm(threadStub(copy));
    const restored = await json<Thread>(await api("POST", `/v1/threads/${copy}/restore`));
    expect(restored).toMatchObject({ forked_from: null, imported_from: again.imported_from });
    // A fork is forked from the thread, and came from the same rollout.
    const fork = await json<Thread>(await api("POST", `/v1/threads/${copy}/fork`, {}), 201);
    expect(fork).toMatchObject({ forked_from: copy, imported_from: again.imported_from });
  });

  it("refuses a legacy rollout from before session_meta, naming the Codex versions that read it", async () => {
    const res = await importRollout(newThreadId(), jsonl(LEGACY_ROLLOUT));
    const reason =
      "this is a legacy Codex rollout (written by Codex 0.2–0.31, before session_meta lines); " +
      "only Codex 0.8–0.31 can read it and no Codex release converts it to the current format, " +
      "so it cannot be imported: Spindle imports rollouts written by Codex 0.32 and later";
    expect(await json(res, 400)).toMatchObject({
      code: "invalid_request",
      detail: `Line 1: ${reason}`,
      errors: [{ path: "/line/1", message: reason }],
    });
  });
});

describe("a paginated Codex fork", () => {
  const { parent, child, parentId, childId } = paginatedFork();

  it("without its parent is refused, saying which session it needs", async () => {
    const res = await importRollout(newThreadId(), jsonl(child));
    expect(await json(res, 400)).toMatchObject({
      code: "parent_rollout_required",
      errors: [{ path: "/line/1", message: `history_base names session ${parentId}` }],
    });
  });

  it("with the thread imported from its parent starts with the parent's lines before its base", async () => {
    const { id: parentThread } = await importFixture({ lines: parent });
    const { id, thread } = await importFixture({ lines: child }, parentThread);
    expect(thread).toMatchObject({
      forked_from: parentThread,
      imported_from: { session_id: childId, cli_version: "0.157.0", originator: "codex-tui" },
      turn_count: 2,
      config: {
        ...DEFAULT_CONFIG,
        model: "spindle-local-lite",
        environments: [{ id: "local", cwd: "/srv/repo" }],
        timezone: "Europe/Paris",
        personality: "friendly",
        permissions: {
          ...DEFAULT_CONFIG.permissions,
          sandbox: "read-only",
          approval_policy: "never",
        },
      },
      warnings: [],
    });
    const history = await json<{ data: Item[] }>(
      await api("GET", `/v1/threads/${id}/history?limit=1000`),
    );
    expect(textsOf(history.data)).toEqual([
      "first question",
      "First answer.",
      "child question",
      "Child answer.",
    ]);
    // The export holds the whole history: it imports again without a parent.
    const exported = await (await api("GET", `/v1/threads/${id}/rollout`)).text();
    const again = await json<Thread>(await importRollout(newThreadId(), exported), 201);
    expect(again).toMatchObject({ turn_count: 2, config: thread.config });
  });

  it("with a thread that was not imported from its parent, or for a rollout that is no fork, is refused", async () => {
    const { id: other } = await importFixture({ lines: CODEX_FIXTURES[0]?.lines ?? [] });
    const wrong = await importRollout(newThreadId(), jsonl(child), {}, { parent: other });
    expect(await json(wrong, 400)).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "parent" }],
    });
    const { id: parentThread } = await importFixture({ lines: parent });
    const notFork = await importRollout(newThreadId(), jsonl(parent), {}, { parent: parentThread });
    expect(await json(notFork, 400)).toMatchObject({
      code: "invalid_request",
      errors: [{ path: "parent", message: "the rollout's session_meta has no history_base" }],
    });
    const missing = await importRollout(newThreadId(), jsonl(child), {}, { parent: newThreadId() });
    expect(await json(missing, 404)).toMatchObject({ code: "not_found" });
  });
});
