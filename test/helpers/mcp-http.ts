import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

export interface ListeningServer {
  /** `http://127.0.0.1:{port}` */
  readonly origin: string;
  close(): Promise<void>;
}

/**
 * Serves a fetch handler (the test MCP server's) on a loopback socket, answers streamed as they
 * come (an MCP server's SSE answers included). `port` 0: any free one.
 */
export async function listenOnLoopback(
  handler: (request: Request) => Promise<Response>,
  port = 0,
): Promise<ListeningServer> {
  const server = createServer(async (req, res) => {
    try {
      const response = await handler(await requestOf(req, origin()));
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (response.body) {
        for await (const chunk of response.body) res.write(chunk);
      }
      res.end();
    } catch (err) {
      res.writeHead(500);
      res.end(String(err));
    }
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  const origin = () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin: origin(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function requestOf(req: IncomingMessage, origin: string): Promise<Request> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === "string") headers.set(name, value);
    else if (Array.isArray(value)) for (const v of value) headers.append(name, v);
  }
  const method = req.method ?? "GET";
  return new Request(new URL(req.url ?? "/", origin), {
    method,
    headers,
    ...(method === "GET" || method === "HEAD" ? {} : { body: Buffer.concat(chunks) }),
  });
}
