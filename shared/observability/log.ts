/**
 * Structured log lines: one JSON object per console line, which Workers Logs indexes field by
 * field. A line carries a closed set of fields (ids, statuses, counts, durations and bounded
 * error descriptions), so no caller can log a body, a header value, a key or a prompt by
 * passing it along: there is no field for it. Pure: the console it writes to is passed in by the
 * edge and the objects.
 */

export type LogLevel = "info" | "warn" | "error";

/** What a log line may say, besides its level, event and time. */
export interface LogFields {
  /** The edge request the work belongs to (`x-request-id`). */
  request_id?: string | undefined;
  tenant?: string | undefined;
  thread?: string | undefined;
  turn?: string | undefined;
  hook?: string | undefined;
  endpoint?: string | undefined;
  webhook_id?: string | undefined;
  jurisdiction?: string | null | undefined;
  /** A request's method, its route's operation id, and the HTTP status it was answered with. */
  method?: string | undefined;
  route?: string | null | undefined;
  http_status?: number | undefined;
  /** A task's kind and how it ended, or a webhook delivery's status after an attempt. */
  kind?: string | undefined;
  status?: string | undefined;
  /** A stable problem or attempt code (`provider_error`, `http_500`, `timeout`, …). */
  error_code?: string | null | undefined;
  /** The provider a task's requests went to, and the HTTP status of its last answer. */
  provider?: string | null | undefined;
  provider_status?: number | null | undefined;
  /** A webhook receiver's HTTP status. */
  status_code?: number | null | undefined;
  event_type?: string | undefined;
  input_tokens?: number | undefined;
  output_tokens?: number | undefined;
  duration_ms?: number | undefined;
  attempt?: number | undefined;
  delay_ms?: number | undefined;
  count?: number | undefined;
  /** Why a repair or a fallback happened, in the service's own words. */
  reason?: string | undefined;
  /** An unexpected failure: `describeError`'s text of it. */
  error?: string | undefined;
}

/** Longest string a field keeps; past it the value is cut and ends in `…`. */
export const MAX_FIELD_CHARS = 500;

/** The JSON text of one log line; fields left undefined are left out. */
export function formatLogLine(
  level: LogLevel,
  event: string,
  fields: LogFields,
  atMs: number,
): string {
  const line: Record<string, unknown> = { level, event: bounded(event) };
  for (const [key, value] of Object.entries(fields)) {
    if (value !== undefined) line[key] = typeof value === "string" ? bounded(value) : value;
  }
  line.at = new Date(atMs).toISOString();
  return JSON.stringify(line);
}

/** An error as a log line shows it: its name and message (never its cause or stack). */
export function describeError(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return typeof err === "string" ? err : "non-error value thrown";
}

function bounded(text: string): string {
  return text.length <= MAX_FIELD_CHARS ? text : `${text.slice(0, MAX_FIELD_CHARS - 1)}…`;
}

/** Where lines go: `console` at the edge and in the objects (Workers Logs reads it). */
export type LogSink = Pick<Console, "log" | "warn" | "error">;

/** Writes log lines to a sink, each with the fields it was made `with`. */
export class Logger {
  readonly #sink: LogSink;
  readonly #context: LogFields;
  readonly #now: () => number;

  constructor(sink: LogSink, context: LogFields = {}, now: () => number = Date.now) {
    this.#sink = sink;
    this.#context = context;
    this.#now = now;
  }

  /** A logger whose lines carry `fields` too (a field given again takes the new value). */
  with(fields: LogFields): Logger {
    return new Logger(this.#sink, merged(this.#context, fields), this.#now);
  }

  info(event: string, fields: LogFields = {}): void {
    this.#sink.log(this.#line("info", event, fields));
  }

  warn(event: string, fields: LogFields = {}): void {
    this.#sink.warn(this.#line("warn", event, fields));
  }

  error(event: string, fields: LogFields = {}): void {
    this.#sink.error(this.#line("error", event, fields));
  }

  #line(level: LogLevel, event: string, fields: LogFields): string {
    return formatLogLine(level, event, merged(this.#context, fields), this.#now());
  }
}

/** `base` with the fields `more` sets (one left undefined keeps the base's value). */
function merged(base: LogFields, more: LogFields): LogFields {
  const fields: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(more)) if (value !== undefined) fields[key] = value;
  return fields as LogFields;
}
