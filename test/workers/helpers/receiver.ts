import { vi } from "vitest";

/** Where the workerd suites' webhook endpoints point: answered by `receiver`, in the isolate. */
export const RECEIVER_URL = "http://127.0.0.1:9/hooks";

export interface Received {
  url: string;
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  redirect: string | undefined;
}

/**
 * Answers the outbound webhook requests of this isolate (the queue consumer runs here) with
 * `answer` (by the n-th request, from 0), and records each; any other request goes out as it
 * would (`other`, when given, answers those instead: a provider stand-in). An answer may be
 * `"hang"`: it never comes, until the request's signal aborts; or a promise of a status: it comes
 * when the test settles it (or the signal aborts first).
 */
export function receiver(
  answer: (request: Received, n: number) => number | "hang" | Promise<number> = () => 200,
  other?: (url: string) => Response,
): Received[] {
  const received: Received[] = [];
  const realFetch = globalThis.fetch;
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const request = new Request(input, init);
    if (!request.url.startsWith(RECEIVER_URL)) {
      return other ? other(request.url) : realFetch(input, init);
    }
    const seen: Received = {
      url: request.url,
      id: request.headers.get("webhook-id") ?? "",
      timestamp: request.headers.get("webhook-timestamp") ?? "",
      signature: request.headers.get("webhook-signature") ?? "",
      body: await request.text(),
      redirect: init?.redirect,
    };
    received.push(seen);
    const status = answer(seen, received.length - 1);
    if (status === "hang" || status instanceof Promise) {
      return new Promise<Response>((resolve, reject) => {
        init?.signal?.addEventListener("abort", () => reject(init.signal?.reason), { once: true });
        if (status instanceof Promise) status.then((code) => resolve(answered(code)), reject);
      });
    }
    return answered(status);
  });
  return received;
}

function answered(status: number): Response {
  const headers: Record<string, string> =
    status >= 300 && status < 400 ? { location: "https://elsewhere.test/" } : {};
  return new Response(status === 204 ? null : "ok", { status, headers });
}
