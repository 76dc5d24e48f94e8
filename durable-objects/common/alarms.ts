import type { Clock } from "../../shared/ports/index.ts";

/** The longest wait between two attempts of a failing duty (a flush, a push, a hand-off). */
export const RETRY_MAX_MS = 5 * 60_000;

/** The wait before the next attempt after `attempts` failures in a row: 2 s, 4 s, … 5 min. */
export function retryDelayMs(attempts: number): number {
  return Math.min(1_000 * 2 ** attempts, RETRY_MAX_MS);
}

/**
 * The object's one alarm, shared by every duty that needs a wake-up (a flush, a running task's
 * watch, a queued turn, event expiry, a flush retry). The alarm handler does every duty each
 * time, so firing early loses nothing: a duty only ever brings the alarm forward.
 */
export class AlarmSchedule {
  readonly #storage: Pick<DurableObjectStorage, "getAlarm" | "setAlarm" | "deleteAlarm">;
  readonly #clock: Clock;
  /**
   * When the alarm is due, as this instance last set or read it (null: none; undefined: not read
   * yet). Saves a storage round trip per turn: consecutive turns find it already due soon.
   */
  #due: number | null | undefined;

  constructor(
    storage: Pick<DurableObjectStorage, "getAlarm" | "setAlarm" | "deleteAlarm">,
    clock: Clock,
  ) {
    this.#storage = storage;
    this.#clock = clock;
  }

  /**
   * Makes the alarm fire within `ms`: an alarm already due sooner stays, a later one (event
   * expiry, a flush retry's backoff) is brought forward.
   */
  async within(ms: number): Promise<void> {
    await this.by(this.#clock.nowMs() + ms);
  }

  /** Brings the alarm forward to `due` (epoch ms), never later than it already is. */
  async by(due: number): Promise<void> {
    if (this.#due === undefined) {
      const stored = await this.#storage.getAlarm();
      // A call that ran during the read (a task's start and its end) may have set one already.
      this.#due ??= stored;
    }
    if (this.#due === null || this.#due > due) await this.at(due);
  }

  /** Sets the alarm to `atMs`, sooner or later than it was. */
  async at(atMs: number): Promise<void> {
    this.#due = atMs;
    await this.#storage.setAlarm(atMs);
  }

  /** The alarm that woke the object is spent; whatever runs now sets the next one. */
  fired(): void {
    this.#due = null;
  }

  /** Whether no alarm is due, as far as this instance knows. */
  get unset(): boolean {
    return this.#due === null;
  }

  async clear(): Promise<void> {
    await this.#storage.deleteAlarm();
    this.#due = null;
  }
}
