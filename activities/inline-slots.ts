// Per-model concurrency of an inline image model in one worker process: its calls run as local
// activities when a slot is free (tryTake) and on its activity queue otherwise (take, waiting), so
// both paths share the model's `concurrency`.

/** A counting semaphore whose waiters give up when their signal aborts (a canceled task). */
export class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(size: number) {
    this.free = size;
  }

  /** A slot's release if one is free now, else undefined. */
  tryTake(): (() => void) | undefined {
    if (this.free === 0) return undefined;
    this.free--;
    return this.release();
  }

  /** Resolves with the slot's release once one is free (call it once; later calls do nothing). */
  async take(signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted();
    const now = this.tryTake();
    if (now) return now;
    await new Promise<void>((resolve, reject) => {
      const wake = () => {
        signal.removeEventListener('abort', abort);
        resolve();
      };
      const abort = () => {
        this.waiting.splice(this.waiting.indexOf(wake), 1);
        reject(signal.reason);
      };
      this.waiting.push(wake);
      signal.addEventListener('abort', abort, { once: true });
    });
    return this.release();
  }

  private release(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // The slot passes straight to the next waiter, so a new caller cannot overtake it.
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }

  /** Calls waiting for a slot now. */
  get queued(): number {
    return this.waiting.length;
  }
}
