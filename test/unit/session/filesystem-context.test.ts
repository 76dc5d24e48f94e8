import { describe, expect, it } from "vitest";
import type { JsonObject, RolloutItem } from "../../../shared/protocol/index.ts";
import { contextLinesOf, newSession, replayed, runTurn } from "../helpers/engine.ts";

const FILESYSTEM =
  '<filesystem><workspace_roots><root>/repo</root></workspace_roots><permission_profile type="managed"><file_system type="restricted"><entry access="read"><special>:root</special></entry><entry access="write"><path>/repo</path></entry></file_system></permission_profile></filesystem>';

/** The date and timezone every environment diff states (the thread's default timezone, T0). */
const DATE_TZ = "  <current_date>2026-03-01</current_date>\n  <timezone>UTC</timezone>\n";

function payloads(lines: readonly RolloutItem[]) {
  return lines.map((l) => {
    if (l.type === "response_item" && l.payload.type === "message") {
      return [l.payload.role, l.payload.content.map((p) => ("text" in p ? p.text : ""))];
    }
    if (l.type === "world_state") return ["world_state", l.payload];
    return [l.type];
  });
}

describe("the <filesystem> line across turns", () => {
  it("a thread resumed from a baseline without it sends it once, in an environment diff of its own", async () => {
    const writer = newSession({ cwd: "/repo" });
    await runTurn(writer, "first");
    const older = writer.sink.items.map((item): RolloutItem => {
      if (item.type !== "world_state") return item;
      const environments = { ...(item.payload.state.environments as JsonObject) };
      delete environments.filesystem;
      return {
        type: "world_state",
        payload: { full: true, state: { ...item.payload.state, environments } },
      };
    });
    const h = newSession({ cwd: "/repo" });
    h.sink.items.push(...older);
    const resumed = replayed(h);
    let mark = resumed.sink.items.length;
    await runTurn(resumed, "second");
    expect(payloads(contextLinesOf(resumed.sink.items, mark))).toEqual([
      ["user", [`<environment_context>\n${DATE_TZ}  ${FILESYSTEM}\n</environment_context>`]],
      ["turn_context"],
      ["world_state", { full: false, state: { environments: { filesystem: FILESYSTEM } } }],
    ]);
    mark = resumed.sink.items.length;
    await runTurn(resumed, "third");
    expect(payloads(contextLinesOf(resumed.sink.items, mark))).toEqual([["turn_context"]]);
  });

  it("a new writable root re-sends the permissions and, of the environment, the turn values: date, timezone and the new filesystem line", async () => {
    const h = newSession({ cwd: "/repo" });
    await runTurn(h, "first");
    const mark = h.sink.items.length;
    await runTurn(h, "second", {
      permissions: {
        sandbox: "workspace-write",
        approval_policy: "on-request",
        writable_roots: ["/data"],
        network_access: false,
      },
    });
    const [developer, user, turnContext, worldState, ...rest] = payloads(
      contextLinesOf(h.sink.items, mark),
    );
    expect(developer?.[0]).toBe("developer");
    expect(String(developer?.[1])).toContain("Writable roots:\n- /data");
    const line = FILESYSTEM.replace(
      "</file_system>",
      '<entry access="write"><path>/data</path></entry></file_system>',
    );
    expect(user).toEqual([
      "user",
      [`<environment_context>\n${DATE_TZ}  ${line}\n</environment_context>`],
    ]);
    expect(turnContext).toEqual(["turn_context"]);
    expect(worldState).toEqual([
      "world_state",
      {
        full: false,
        state: {
          environments: { filesystem: line },
          permissions: { instructions_fingerprint: expect.stringMatching(/^sha1:/) },
        },
      },
    ]);
    expect(rest).toEqual([]);
  });
});
