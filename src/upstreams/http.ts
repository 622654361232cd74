// The HTTP steps every provider takes the same way: sending (transport failures, with whether the
// request may have left) and reading JSON.
import { causeCode, notDispatched } from './answers.js';
import { TransportFailure, UpstreamFailure } from './failures.js';

/** Sends the request and reads the whole answer; an abort (timeout, cancellation) is rethrown as is. */
export async function fetchText(
  url: string,
  init: RequestInit & { signal: AbortSignal },
): Promise<{ res: Response; text: string }> {
  try {
    const res = await fetch(url, init);
    return { res, text: await res.text() };
  } catch (err) {
    if (init.signal.aborted) throw err;
    const code = causeCode(err);
    throw new TransportFailure(`upstream connection failed (${code ?? (err as Error).message})`, !notDispatched(code));
  }
}

export function parseUpstreamJson<T = unknown>(text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new UpstreamFailure('upstream_error', 'upstream answered with a body that is not JSON');
  }
}
