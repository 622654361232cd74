// The client's parts that need no server: typed errors, result parsing, request shapes, chat
// streaming, video downloads with their fallback, the list cursor, and where the key is sent.
// Imported by the package entry point, as a consumer would.
import { describe, expect, it } from 'vitest';
import {
  APIConnectionError,
  APIConnectionTimeoutError,
  AuthenticationError,
  buildImageRequest,
  chatTextOf,
  errorFromResponse,
  imagesOf,
  InternalServerError,
  isRetryable,
  Kiln,
  KilnClientError,
  NotFoundError,
  QueueFullError,
  RateLimitedError,
  TaskFailedError,
  TaskNotReadyError,
  UpstreamError,
  userMessage,
  videoUrlsOf,
} from 'kiln/client';
import { fakeFetch, json, succeeded, transportError, type Handler } from './fake-fetch.js';

const kilnWith = (handler: Handler, extra: Record<string, unknown> = {}) => {
  const fake = fakeFetch(handler);
  return {
    kiln: new Kiln({ baseURL: 'http://kiln.test/', apiKey: 'secret-key', fetch: fake.fetch, ...extra }),
    ...fake,
  };
};
const err = (status: number, code: string, headers: Record<string, string> = {}) =>
  errorFromResponse(status, new Headers(headers), { error: { code, message: 'm' } });

describe('typed errors', () => {
  it('picks the class by code, then by status, and carries Retry-After', () => {
    const limited = err(429, 'rate_limited', { 'retry-after': '7' });
    expect(limited).toBeInstanceOf(RateLimitedError);
    expect(limited.retryAfter).toBe(7);
    expect(err(409, 'task_not_ready')).toBeInstanceOf(TaskNotReadyError);
    expect(err(409, 'task_failed')).toBeInstanceOf(TaskFailedError);
    expect(err(404, 'not_found')).toBeInstanceOf(NotFoundError);
    expect(err(404, 'model_not_found')).toBeInstanceOf(NotFoundError);
    expect(err(401, 'missing_api_key')).toBeInstanceOf(AuthenticationError);
    expect(err(503, 'queue_full')).toBeInstanceOf(QueueFullError);
    expect(err(504, 'upstream_timeout')).toBeInstanceOf(UpstreamError);
    expect(err(500, 'internal_error')).toBeInstanceOf(InternalServerError);
    const noBody = errorFromResponse(502, new Headers(), '<html>bad gateway</html>');
    expect(noBody.code).toBe('http_502');
    expect(noBody.message).toContain('bad gateway');
  });

  it("retries transport errors, 429, 503 and proxy 502/504, but not the upstream's own outcome", () => {
    expect(isRetryable(new APIConnectionError('x'))).toBe(true);
    expect(isRetryable(err(429, 'rate_limited'))).toBe(true);
    expect(isRetryable(err(503, 'service_unavailable'))).toBe(true);
    expect(isRetryable(errorFromResponse(502, new Headers(), null))).toBe(true);
    expect(isRetryable(err(504, 'upstream_timeout'))).toBe(false);
    expect(isRetryable(err(502, 'upstream_error'))).toBe(false);
    expect(isRetryable(err(400, 'invalid_request'))).toBe(false);
    expect(isRetryable(err(404, 'not_found'))).toBe(false);
  });

  it('gives up on a server that never answers after timeoutMs, as APIConnectionTimeoutError', async () => {
    // A fetch that answers only its signal, as undici does for a silent server.
    const silent = ((_url: string, init: RequestInit) =>
      new Promise((_, fail) =>
        init.signal!.addEventListener('abort', () => fail(init.signal!.reason)),
      )) as typeof fetch;
    const kiln = new Kiln({ baseURL: 'http://kiln.test/', apiKey: 'k', fetch: silent, timeoutMs: 40, maxRetries: 0 });
    const started = Date.now();
    const e = await kiln.tasks.get('task_x').catch((x) => x);
    expect(e).toBeInstanceOf(APIConnectionTimeoutError);
    expect(e.message).toContain('no response within 40 ms');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('turns a transport failure into APIConnectionError and a missing key into a clear error', async () => {
    const { kiln } = kilnWith(() => transportError('ECONNREFUSED'), { maxRetries: 0 });
    const e = await kiln.tasks.get('task_x').catch((x) => x);
    expect(e).toBeInstanceOf(APIConnectionError);
    expect(e.message).toContain('ECONNREFUSED');
    const saved = process.env.KILN_API_KEY;
    delete process.env.KILN_API_KEY;
    try {
      expect(() => new Kiln({ baseURL: 'http://kiln.test' })).toThrow(/KILN_API_KEY/);
    } finally {
      if (saved !== undefined) process.env.KILN_API_KEY = saved;
    }
  });
});

describe("results by the contract's parsing rules", () => {
  it('images: skips parts without inlineData and non-image types; http data is a URL, else base64', () => {
    const png = Buffer.from('fake png bytes');
    const imgs = imagesOf({
      candidates: [
        {
          content: {
            parts: [
              { text: 'intro' },
              { inlineData: { mimeType: 'image/png', data: 'https://x/1.png' } },
              { inlineData: { mimeType: 'text/plain', data: 'aGk=' } },
            ],
          },
        },
        {
          content: {
            parts: [
              { inlineData: { data: 'http://x/2' } },
              { inlineData: { mimeType: 'image/png', data: png.toString('base64') } },
              { inlineData: { data: 'bm8gdHlwZQ==' } },
            ],
          },
        },
      ],
    });
    expect(imgs).toEqual([
      { kind: 'url', url: 'https://x/1.png', mimeType: 'image/png' },
      { kind: 'url', url: 'http://x/2' },
      { kind: 'base64', mimeType: 'image/png', data: new Uint8Array(png) },
    ]);
    expect(imagesOf({ candidates: null })).toEqual([]);
  });

  it('chat text from a string or from an array of items', () => {
    expect(chatTextOf({ choices: [{ message: { content: 'plain' } }] })).toBe('plain');
    expect(
      chatTextOf({
        choices: [
          { message: { content: [{ type: 'text', text: 'a' }, { type: 'image_url' }, { type: 'text', text: 'b' }] } },
        ],
      }),
    ).toBe('ab');
    expect(chatTextOf({ choices: [] })).toBe('');
  });

  it('video URL from video_url, else data.video_url, else results[*].url', () => {
    expect(
      videoUrlsOf({
        id: 'v',
        status: 'completed',
        video_url: 'u1',
        data: { video_url: 'u2' },
        results: [{ url: 'u3' }],
      }),
    ).toEqual(['u1']);
    expect(videoUrlsOf({ id: 'v', status: 'completed', data: { video_url: 'u2' }, results: [{ url: 'u3' }] })).toEqual([
      'u2',
    ]);
    expect(videoUrlsOf({ id: 'v', status: 'completed', results: [{ url: 'u3' }, { url: 'u4' }] })).toEqual([
      'u3',
      'u4',
    ]);
    expect(videoUrlsOf({ id: 'v', status: 'completed' })).toEqual([]);
  });
});

describe('requests', () => {
  it('builds the generateContent task body: prompt, references, aspect, size, output=url', () => {
    expect(
      buildImageRequest({
        prompt: 'p',
        aspectRatio: '16:9',
        imageSize: '2K',
        references: ['https://r/a.jpg', { url: 'https://r/b', mimeType: 'image/webp' }],
      }),
    ).toEqual({
      contents: [
        {
          role: 'user',
          parts: [
            { text: 'p' },
            { inlineData: { mimeType: 'image/jpeg', data: 'https://r/a.jpg' } },
            { inlineData: { mimeType: 'image/webp', data: 'https://r/b' } },
          ],
        },
      ],
      generationConfig: {
        responseModalities: ['IMAGE'],
        imageConfig: { aspectRatio: '16:9', imageSize: '2K', output: 'url' },
      },
    });
  });

  it('chat messages carry content as an array, images as data URIs with the image/ prefix', () => {
    expect(userMessage({ text: 'hi', images: [{ mimeType: 'image/png', bytes: Buffer.from('abc') }] })).toEqual({
      role: 'user',
      content: [
        { type: 'text', text: 'hi' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,YWJj' } },
      ],
    });
  });

  it('follows the list cursor (before_created_at + before_id) until a short page', async () => {
    const items = [5, 4, 3, 2, 1].map((n) => ({
      id: `task_${n}`,
      model: 'm',
      status: 'succeeded',
      created_at: 100 + n,
      finished_at: 1,
      content_url: '',
    }));
    const { kiln, calls } = kilnWith((call) => {
      const before = call.query.get('before_created_at');
      const rest = before ? items.filter((i) => i.created_at < Number(before)) : items;
      return { json: { object: 'list', days: 3, items: rest.slice(0, Number(call.query.get('limit'))) } };
    });
    const seen = [];
    for await (const t of kiln.tasks.list({ limit: 2 })) seen.push(t.id);
    expect(seen).toEqual(['task_5', 'task_4', 'task_3', 'task_2', 'task_1']);
    expect(calls.map((c) => [c.query.get('before_created_at'), c.query.get('before_id')])).toEqual([
      [null, null],
      ['104', 'task_4'],
      ['102', 'task_2'],
    ]);
  });

  it('reads the content redirect without following it', async () => {
    const { kiln } = kilnWith(
      () => new Response(null, { status: 302, headers: { location: 'http://files.test/a.png' } }),
    );
    expect(await kiln.tasks.content('task_1')).toBe('http://files.test/a.png');
  });

  it('retries a submit after a transport error (maxRetries), honouring Retry-After of a 503', async () => {
    const { kiln, calls } = kilnWith(
      (_c, n) =>
        n === 1
          ? transportError()
          : n === 2
            ? json({ error: { code: 'queue_full', message: 'full' } }, 503, { 'retry-after': '0' })
            : { status: 202, json: { id: 'task_1', status: 'accepted' } },
      { polling: { retryInitialMs: 1 } },
    );
    expect((await kiln.tasks.create({ model: 'm', prompt: 'p' })).id).toBe('task_1');
    expect(calls.length).toBe(3);
    const once = kilnWith(() => transportError(), { maxRetries: 0 });
    await expect(once.kiln.tasks.create({ model: 'm', prompt: 'p' })).rejects.toBeInstanceOf(APIConnectionError);
    expect(once.calls.length).toBe(1);
  });

  it('sends the API key to its own origin only, never to a file host elsewhere', async () => {
    const { kiln, calls } = kilnWith(() => new Response('bytes', { headers: { 'content-type': 'image/png' } }));
    await kiln.download('http://kiln.test/v1/files/a.png');
    await kiln.download('https://cdn.example/a.png');
    expect(calls[0].headers.get('authorization')).toBe('Bearer secret-key');
    expect(calls[1].headers.get('authorization')).toBeNull();
  });
});

describe('chat streaming', () => {
  const sse = (events: string[]) =>
    new Response(events.map((e) => `data: ${e}\n\n`).join(''), { headers: { 'content-type': 'text/event-stream' } });
  const chunk = (content: string) =>
    JSON.stringify({
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta: { content }, finish_reason: null }],
    });

  it('yields chunks until [DONE], asking with stream: true', async () => {
    const { kiln, calls } = kilnWith(() => sse([chunk('Hel'), chunk('lo'), '[DONE]']));
    let text = '';
    for await (const c of kiln.chat.completions.stream({ model: 'c', messages: [userMessage({ text: 'hi' })] }))
      text += c.choices[0].delta.content ?? '';
    expect(text).toBe('Hello');
    expect(calls[0].body.stream).toBe(true);
  });

  it('throws an error event sent after the stream started', async () => {
    const { kiln } = kilnWith(() =>
      sse([chunk('a'), JSON.stringify({ error: { code: 'upstream_error', message: 'lost' } })]),
    );
    const run = async () => {
      for await (const _ of kiln.chat.completions.stream({ model: 'c', messages: [] })) {
        /* drain */
      }
    };
    await expect(run()).rejects.toThrow(/upstream_error: lost/);
  });
});

describe('videos', () => {
  const done = { id: 'video_1', object: 'video' as const, status: 'completed', video_url: 'http://cdn.test/v.mp4' };

  it('downloads video_url, and falls back to /content?variant=video when it cannot be fetched', async () => {
    const ok = kilnWith(() => new Response('mp4', { headers: { 'content-type': 'video/mp4' } }));
    const [a] = await ok.kiln.videos.download(done);
    expect(a.url).toBe('http://cdn.test/v.mp4');

    const fallback = kilnWith((call) =>
      call.path === '/v.mp4'
        ? { status: 403, json: null }
        : new Response('mp4', { headers: { 'content-type': 'video/mp4' } }),
    );
    const [b] = await fallback.kiln.videos.download(done);
    expect(await b.response.text()).toBe('mp4');
    expect(fallback.calls.map((c) => `${c.path}?${c.query}`)).toEqual([
      '/v.mp4?',
      '/v1/videos/video_1/content?variant=video',
    ]);
  });

  it("creates with the contract's fields and refuses to download an unfinished video", async () => {
    const { kiln, calls } = kilnWith(() => ({ json: { id: 'video_1', object: 'video', status: 'queued' } }));
    await kiln.videos.create({
      model: 'v',
      prompt: 'p',
      seconds: '10',
      size: '1792x1024',
      nodeInfoList: [{ nodeId: '6', fieldName: 'text', fieldValue: 'x' }],
    });
    expect(calls[0].body).toEqual({
      model: 'v',
      prompt: 'p',
      seconds: '10',
      size: '1792x1024',
      nodeInfoList: [{ nodeId: '6', fieldName: 'text', fieldValue: 'x' }],
    });
    await expect(kiln.videos.download({ id: 'video_1', status: 'in_progress' })).rejects.toBeInstanceOf(
      KilnClientError,
    );
  });

  it('treats a succeeded image task body and its first URL consistently', () => {
    expect(imagesOf(succeeded('t', 'http://f/x.png'))).toEqual([{ kind: 'url', url: 'http://f/x.png' }]);
  });
});
