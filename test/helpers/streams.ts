/**
 * A request body that sends `text`, then fails as an upload does when its client goes away or
 * sends a malformed chunk.
 */
export function breakingStream(text: string): ReadableStream<Uint8Array> {
  let sent = false;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (sent) return controller.error(new TypeError("Network connection lost."));
      sent = true;
      controller.enqueue(new TextEncoder().encode(text));
    },
  });
}
