/**
 * The handlers of the MCP server routes (design §16): the tenant's registry of remote MCP
 * servers, in the tenant's object (scope `tools`). A server's URL is checked against the
 * outbound URL policy here, before anything is stored; its headers go to the tenant's object and
 * come back in no answer.
 */
import type { Handlers } from "./app.ts";
import { unwrap } from "./errors.ts";
import { requireOutboundUrl } from "./outbound-policy.ts";
import { callerOf, ownTenant } from "./tenancy.ts";

type McpServerOperation =
  | "createMcpServer"
  | "listMcpServers"
  | "getMcpServer"
  | "patchMcpServer"
  | "deleteMcpServer";

export function mcpServerHandlers(): Pick<Handlers, McpServerOperation> {
  return {
    createMcpServer: async (c, { body }) => {
      requireOutboundUrl(c.env, body.url, "MCP server");
      const server = unwrap(await ownTenant(c).createMcpServer(callerOf(c), body));
      return c.json(server, 201, { Location: `/v1/mcp-servers/${server.label}` });
    },

    listMcpServers: async (c, { query }) =>
      c.json(unwrap(await ownTenant(c).listMcpServers(callerOf(c), query))),

    getMcpServer: async (c, { param }) =>
      c.json(unwrap(await ownTenant(c).getMcpServer(callerOf(c), param.label))),

    patchMcpServer: async (c, { param, body }) => {
      if (body.url !== undefined) requireOutboundUrl(c.env, body.url, "MCP server");
      return c.json(unwrap(await ownTenant(c).patchMcpServer(callerOf(c), param.label, body)));
    },

    deleteMcpServer: async (c, { param }) => {
      unwrap(await ownTenant(c).deleteMcpServer(callerOf(c), param.label));
      return c.body(null, 204);
    },
  };
}
