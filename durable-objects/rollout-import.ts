import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, utf8ToBytes } from "@noble/hashes/utils.js";
import type { RolloutLine } from "../shared/protocol/index.ts";
import { decodeRolloutLine, RolloutDecodeError } from "../shared/rollout/index.ts";

export interface ImportedLine {
  /** The line as it came (no line end), persisted byte for byte. */
  text: string;
  line: RolloutLine;
}

export type ImportResult =
  | { ok: true; lines: ImportedLine[] }
  | { ok: false; lineNumber: number; reason: string };

/**
 * Reads Codex JSONL from a byte stream: UTF-8, `\n` or `\r\n` line ends, a leading BOM and blank
 * lines ignored (blank lines still count for line numbers), the final newline optional. The first
 * line that does not decode fails the whole import with its 1-based line number.
 */
export async function readRolloutStream(stream: ReadableStream<Uint8Array>): Promise<ImportResult> {
  const lines: ImportedLine[] = [];
  let lineNumber = 0;
  let pending = "";
  let failure: { lineNumber: number; reason: string } | undefined;
  const take = (raw: string): void => {
    lineNumber += 1;
    let text = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (lineNumber === 1 && text.startsWith("\uFEFF")) text = text.slice(1);
    if (text.trim() === "") return;
    try {
      lines.push({ text, line: decodeRolloutLine(text, lineNumber) });
    } catch (err) {
      const reason = err instanceof RolloutDecodeError ? err.reason : (err as Error).message;
      failure = { lineNumber, reason };
    }
  };
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      pending += value;
      let newline = pending.indexOf("\n");
      while (newline >= 0 && failure === undefined) {
        take(pending.slice(0, newline));
        pending = pending.slice(newline + 1);
        newline = pending.indexOf("\n");
      }
      if (failure !== undefined) {
        await reader.cancel();
        return { ok: false, ...failure };
      }
    }
  } catch (err) {
    return {
      ok: false,
      lineNumber: lineNumber + 1,
      reason: `the body could not be read (${(err as Error).message})`,
    };
  }
  if (pending !== "") take(pending);
  if (failure !== undefined) return { ok: false, ...failure };
  return { ok: true, lines };
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
