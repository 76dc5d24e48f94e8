/** Small statistics and formatting helpers for the benchmark table, and its knobs' parsing. */

/** A knob read from the environment: a positive integer, or `fallback` when unset. */
export function positiveInt(raw: string | undefined, fallback: number): number {
  const value = raw === undefined ? fallback : Number.parseInt(raw, 10);
  if (!Number.isInteger(value) || value < 1) throw new Error(`bad number: ${raw}`);
  return value;
}

/** Nearest-rank percentile (p in 0..100) of unsorted samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1] ?? Number.NaN;
}

export const median = (samples: readonly number[]) => percentile(samples, 50);

export const ms = (value: number) => (Number.isFinite(value) ? `${value.toFixed(1)} ms` : "n/a");

/** The smallest and largest sample, as `a ms–b ms`. */
export const spread = (values: readonly number[]) =>
  values.length === 0 ? "n/a" : `${ms(Math.min(...values))}–${ms(Math.max(...values))}`;

/** A size already in KiB (as wrangler prints it). */
export const kib = (n: number | undefined) => (n === undefined ? "n/a" : `${n.toFixed(2)} KiB`);

export const ratio = (value: number, base: number) =>
  Number.isFinite(value) && Number.isFinite(base) && base > 0
    ? `${(value / base).toFixed(2)}×`
    : "n/a";

export function bytes(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return "n/a";
  if (value < 10 * 1024) return `${Math.round(value)} B`;
  if (value < 10 * 1024 * 1024) return `${(value / 1024).toFixed(1)} KiB`;
  return `${(value / (1024 * 1024)).toFixed(1)} MiB`;
}

export const count = (value: number) => value.toLocaleString("en-US");

/** A GitHub-flavoured markdown table. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  return [
    line(header),
    `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`,
    ...rows.map(line),
  ].join("\n");
}
