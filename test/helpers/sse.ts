/** Server-sent events as the tests read them (workerd suites and end-to-end ones alike). */
export interface SseFrame {
  event?: string;
  id?: string;
  data: string;
}

/** Parses SSE frames from text (comments skipped). */
export function parseSse(text: string): SseFrame[] {
  const frames: SseFrame[] = [];
  for (const block of text.split(/\n\n/)) {
    const frame: SseFrame = { data: "" };
    let any = false;
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = line.slice(0, colon);
      const value = line.slice(colon + 1).replace(/^ /, "");
      any = true;
      if (field === "event") frame.event = value;
      else if (field === "id") frame.id = value;
      else if (field === "data") frame.data += frame.data ? `\n${value}` : value;
    }
    if (any) frames.push(frame);
  }
  return frames;
}

/**
 * Reads an SSE response until `stop` says so (or the stream ends), then cancels it. `stop` sees
 * whole frames only: a long one arrives in several chunks. Linear in the stream's length: text is
 * joined and parsed only when a chunk ends a frame.
 */
export async function readSse(
  res: Response,
  stop: (frames: SseFrame[]) => boolean = () => false,
): Promise<SseFrame[]> {
  const reader = res.body?.pipeThrough(new TextDecoderStream()).getReader();
  if (!reader) throw new Error("no body");
  const frames: SseFrame[] = [];
  /** Text after the last whole frame: `head`, then the chunks received since. */
  let head = "";
  let chunks: string[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const before = chunks.at(-1) ?? head;
    chunks.push(value);
    if (!value.includes("\n\n") && !(before.endsWith("\n") && value.startsWith("\n"))) continue;
    const text = head + chunks.join("");
    const end = text.lastIndexOf("\n\n") + 2;
    frames.push(...parseSse(text.slice(0, end)));
    head = text.slice(end);
    chunks = [];
    if (stop(frames)) {
      await reader.cancel();
      return frames;
    }
  }
  return [...frames, ...parseSse(head + chunks.join(""))];
}
