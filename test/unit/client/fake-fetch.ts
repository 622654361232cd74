// A fake `fetch` for client unit tests: routes requests to a handler and records each call with the
// (fake) time it was made, so tests can assert the polling schedule.

export interface Call {
  /** ms since the fake server was created (fake timers make this exact). */
  t: number;
  method: string;
  path: string;
  query: URLSearchParams;
  headers: Headers;
  body: any;
}

export type Reply = Response | Error | { status?: number; json?: unknown; headers?: Record<string, string> };
export type Handler = (call: Call, nth: number) => Reply | Promise<Reply>;

export function fakeFetch(handler: Handler) {
  const t0 = Date.now();
  const calls: Call[] = [];
  const fetch = (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    let body: any = null;
    if (typeof init.body === 'string') {
      try {
        body = JSON.parse(init.body);
      } catch {
        body = init.body;
      }
    }
    const call: Call = {
      t: Date.now() - t0,
      method: init.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: new Headers(init.headers),
      body,
    };
    calls.push(call);
    const reply = await handler(call, calls.length);
    if (reply instanceof Error) throw reply;
    if (reply instanceof Response) return reply;
    return json(reply.json ?? null, reply.status ?? 200, reply.headers);
  }) as typeof globalThis.fetch;
  return { fetch, calls, times: (path?: string) => calls.filter((c) => !path || c.path === path).map((c) => c.t) };
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(body === null ? null : JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

/** What undici throws when no HTTP status came back (refused, reset, TLS). */
export function transportError(code = 'ECONNRESET'): Error {
  return Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error(`read ${code}`), { code }) });
}

export const task = (id: string, status: string, extra: Record<string, unknown> = {}) => ({
  id,
  object: 'image.task',
  model: 'm',
  status,
  created_at: 1,
  finished_at: null,
  candidates: null,
  error: null,
  ...extra,
});

export const succeeded = (id: string, url = `http://files.example/${id}.png`) =>
  task(id, 'succeeded', {
    finished_at: 2,
    response_id: 'r',
    model_version: 'v',
    candidates: [{ content: { parts: [{ text: 'here' }, { inlineData: { data: url } }] }, finishReason: 'STOP' }],
  });

export const submitted = (id: string) => ({
  id,
  object: 'image.task',
  model: 'm',
  status: 'accepted',
  polling_url: `/v1/tasks/${id}`,
  content_url: `/v1/tasks/${id}/content`,
});
