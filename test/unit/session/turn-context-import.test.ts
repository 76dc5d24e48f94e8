import { describe, expect, it } from "vitest";
import { threadConfigFromTurnContext } from "../../../shared/session/index.ts";

const known = new Set(["spindle-local"]);

describe("threadConfigFromTurnContext", () => {
  it("maps a Codex turn_context onto a thread configuration", () => {
    expect(
      threadConfigFromTurnContext(
        {
          cwd: "/repo",
          model: "spindle-local",
          timezone: "Europe/Paris",
          approval_policy: "never",
          sandbox_policy: {
            mode: "workspace-write",
            network_access: true,
            writable_roots: ["/tmp"],
          },
          developer_instructions: "Be careful.",
          truncation_policy: { mode: "bytes", limit: 4096 },
        },
        known,
      ),
    ).toEqual({
      config: {
        model: "spindle-local",
        cwd: "/repo",
        timezone: "Europe/Paris",
        permissions: {
          sandbox: "workspace-write",
          approval_policy: "never",
          writable_roots: ["/tmp"],
          network_access: true,
        },
        developer_instructions: "Be careful.",
        truncation: { bytes: 4096 },
      },
      dropped: [],
    });
  });

  it("leaves out what Spindle does not know and says so", () => {
    const { config, dropped } = threadConfigFromTurnContext(
      {
        cwd: "/r",
        model: "gpt-5.4",
        approval_policy: "on-request",
        sandbox_policy: { mode: "external-sandbox" },
        environments: [
          { environment_id: "a", cwd: "/a" },
          { environment_id: "b", cwd: "/b" },
        ],
      },
      known,
    );
    expect(config).toEqual({
      environments: [
        { id: "a", cwd: "/a" },
        { id: "b", cwd: "/b" },
      ],
    });
    expect(dropped).toEqual(["model gpt-5.4", "permissions external-sandbox/on-request"]);
  });
});
