// Waiting on state that changes as frames arrive, with a timeout: tests and
// applications wait for what they expect instead of sleeping.

import { AgentHostError, Reason } from "./errors.js";

/** Wakes every waiter whenever `notify()` is called. */
export class Changes {
  #waiters = new Set<() => void>();

  notify(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const wake of waiters) wake();
  }

  /**
   * Resolves once `holds()` is true (checked now and after every change);
   * rejects with reason TIMEOUT after `timeoutMs`.
   */
  async until(holds: () => boolean, timeoutMs: number, what = "the condition"): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!holds()) {
      const left = deadline - Date.now();
      if (left <= 0 || !(await this.#next(left))) {
        throw new AgentHostError(`timed out after ${timeoutMs} ms waiting for ${what}`, {
          reason: Reason.TIMEOUT,
        });
      }
    }
  }

  /** Whether a change came within `ms`. */
  #next(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(wake);
        resolve(false);
      }, ms);
      this.#waiters.add(wake);
    });
  }
}

/** A promise that resolves after `ms`, or at once when `signal` aborts. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}
