import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, concatBytes, utf8ToBytes } from "@noble/hashes/utils.js";
import { rolloutLineMaxBytes } from "../../../shared/api/index.ts";
import type { RolloutLine } from "../../../shared/protocol/index.ts";
import { decodeRolloutLine, RolloutDecodeError } from "../../../shared/rollout/index.ts";

export interface ImportedLine {
  /** The line as it came (no line end), persisted byte for byte. */
  text: string;
  line: RolloutLine;
}

export type ImportResult =
  | { ok: true; lines: ImportedLine[] }
  | {
      ok: false;
      /** `payload_too_large` for a line over the limit, else `invalid_request`. */
      code: "invalid_request" | "payload_too_large";
      lineNumber: number;
      reason: string;
    };

const NEWLINE_BYTE = 0x0a;

/**
 * Reads Codex JSONL from a byte stream: UTF-8, `\n` or `\r\n` line ends, a leading BOM and blank
 * lines ignored (blank lines still count for line numbers), the final newline optional. The first
 * line that does not decode fails the whole import with its 1-based line number, and so does a
 * line longer than `maxLineBytes`, as soon as that many bytes of it have arrived.
 *
 * Linear in the body whatever its line lengths: each chunk is searched once for line ends (a
 * `\n` byte is never part of a multi-byte UTF-8 sequence), and a line's bytes are joined and
 * decoded once, when it ends.
 */
export async function readRolloutStream(
  stream: ReadableStream<Uint8Array>,
  maxLineBytes = rolloutLineMaxBytes,
): Promise<ImportResult> {
  const lines: ImportedLine[] = [];
  // BOMs are handled below: only the first line's is dropped, as the stream's start.
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  let lineNumber = 0;
  /** The bytes so far of the line being read, from earlier chunks. */
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  const tooLong = (): ImportResult => ({
    ok: false,
    code: "payload_too_large",
    lineNumber: lineNumber + 1,
    reason: `the line is longer than ${maxLineBytes} bytes`,
  });
  /** Decodes the line that ends with `last`; a failure when it does not decode. */
  const take = (last: Uint8Array): ImportResult | undefined => {
    lineNumber += 1;
    let text = decoder.decode(pending.length === 0 ? last : concatBytes(...pending, last));
    pending = [];
    pendingBytes = 0;
    if (text.endsWith("\r")) text = text.slice(0, -1);
    if (lineNumber === 1 && text.startsWith("\uFEFF")) text = text.slice(1);
    if (text.trim() === "") return undefined;
    try {
      lines.push({ text, line: decodeRolloutLine(text, lineNumber) });
      return undefined;
    } catch (err) {
      const reason = err instanceof RolloutDecodeError ? err.reason : (err as Error).message;
      return { ok: false, code: "invalid_request", lineNumber, reason };
    }
  };
  const reader = stream.getReader();
  const stop = async (failure: ImportResult): Promise<ImportResult> => {
    await reader.cancel().catch(() => {});
    return failure;
  };
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      let start = 0;
      for (
        let end = value.indexOf(NEWLINE_BYTE);
        end >= 0;
        end = value.indexOf(NEWLINE_BYTE, start)
      ) {
        if (pendingBytes + (end - start) > maxLineBytes) return stop(tooLong());
        const failure = take(value.subarray(start, end));
        if (failure) return stop(failure);
        start = end + 1;
      }
      if (start < value.byteLength) {
        pendingBytes += value.byteLength - start;
        if (pendingBytes > maxLineBytes) return stop(tooLong());
        pending.push(value.subarray(start));
      }
    }
  } catch (err) {
    return {
      ok: false,
      code: "invalid_request",
      lineNumber: lineNumber + 1,
      reason: `the body could not be read (${(err as Error).message})`,
    };
  }
  const failure = pending.length > 0 ? take(new Uint8Array()) : undefined;
  return failure ?? { ok: true, lines };
}

/** The lines as a JSONL byte stream (each line followed by `\n`). */
export function jsonlStream(texts: readonly string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      // Batches of lines keep chunks reasonably sized for long rollouts.
      let chunk = "";
      while (i < texts.length && chunk.length < 64 * 1024) chunk += `${texts[i++]}\n`;
      if (chunk !== "") controller.enqueue(encoder.encode(chunk));
      if (i >= texts.length) controller.close();
    },
  });
}

const NEWLINE = utf8ToBytes("\n");

/**
 * An import's request fingerprint: SHA-256 (hex) of the worker's fingerprint of the route and
 * query, then the lines as they are stored, each followed by `\n` (so line ends, a BOM or blank
 * lines do not change it). Hashed line by line: an import may be 64 MiB, and no second copy of
 * its text is made.
 */
export function importFingerprint(requestFingerprint: string, read: ImportResult): string {
  // An unreadable body is refused before the key is kept: any value that no readable one gives.
  if (!read.ok) return "an unreadable body";
  const lines = read.lines;
  const hash = sha256.create().update(utf8ToBytes(requestFingerprint)).update(NEWLINE);
  for (const line of lines) hash.update(utf8ToBytes(line.text)).update(NEWLINE);
  return bytesToHex(hash.digest());
}
