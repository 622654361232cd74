// Reference images: forwarded as URLs by default; downloaded in the activity for `inlineReferences`
// models, through the SSRF guard. The guard is tested with its real rules against real servers;
// only 127.0.0.2 is exempted (REFERENCE_FETCH_ALLOW, test-only) to stand in for a public host, and
// names are pointed at addresses through the injected resolver.
import type { LookupAddress } from 'node:dns';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createSafeFetch, refusedAddress, UnusableUrl } from '../../../src/infra/safe-fetch.js';
import { REFERENCE_TYPES } from '../../../activities/providers/references.js';
import { startFakeGemini, fakeGeminiModel, TINY_PNG, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { FakeImageHost } from '../../support/fake-images.js';
import { startKiln, http, submitBody, waitForStatus, TERMINAL, KEY_A, type Kiln } from '../../support/kiln.js';

const PUBLIC = '127.0.0.2';
let host: FakeImageHost; // "public", on 127.0.0.2
let sentinel: FakeImageHost; // on 127.0.0.1: must never be reached

beforeAll(async () => {
  host = await new FakeImageHost().start(PUBLIC);
  sentinel = await new FakeImageHost().start('127.0.0.1');
});
afterAll(async () => {
  await host?.close();
  await sentinel?.close();
});
beforeEach(() => {
  host.requests.length = 0;
  sentinel.requests.length = 0;
});

const NAMES: Record<string, string[]> = {
  'images.example.test': [PUBLIC],
  'internal.example.test': ['10.0.0.5'],
  'metadata.example.test': ['169.254.169.254'],
  'mixed.example.test': [PUBLIC, '192.168.1.10'],
  'v6-loopback.example.test': ['::1'],
};
let lookups: string[] = [];
const resolve = async (name: string): Promise<LookupAddress[]> => {
  lookups.push(name);
  const known = NAMES[name];
  if (known) return known.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  // Anything else goes to the system resolver (localhost resolves to loopback for real).
  const { lookup } = await import('node:dns/promises');
  return lookup(name, { all: true });
};
const MAX = 64 * 1024;
const safeFetch = createSafeFetch({
  maxBytes: MAX,
  maxRedirects: 3,
  acceptType: (t) => REFERENCE_TYPES.has(t),
  allow: [PUBLIC],
  resolve,
});
const get = (url: string) => safeFetch(url, AbortSignal.timeout(5000));

async function refused(url: string, reason: RegExp) {
  const err = await get(url).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, url).toBeInstanceOf(UnusableUrl);
  expect((err as Error).message, url).toMatch(reason);
}

describe('address rules', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.0.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['fe80::1', 'linkLocal'],
    ['febf::1', 'linkLocal'],
    ['fc00::1', 'uniqueLocal'],
    ['fd12:3456::1', 'uniqueLocal'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['ff02::1', 'multicast'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['100.127.255.254', 'carrierGradeNat'],
    ['255.255.255.255', 'broadcast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'linkLocal'],
    ['2002:7f00:1::1', '6to4'],
    ['64:ff9b::a00:1', 'rfc6052'],
  ])('%s is refused (%s)', (address, range) => {
    expect(refusedAddress(address)).toBe(`${range} address`);
  });

  it.each(['8.8.8.8', '1.1.1.1', '172.32.0.1', '100.128.0.1', '169.253.255.255', '2606:4700:4700::1111'])(
    '%s (public unicast) is allowed',
    (address) => {
      expect(refusedAddress(address)).toBeNull();
    },
  );

  it('the allow-list exempts exactly what it names', () => {
    expect(refusedAddress('127.0.0.2', ['127.0.0.2'])).toBeNull();
    expect(refusedAddress('127.0.0.1', ['127.0.0.2'])).toBe('loopback address');
    expect(refusedAddress('10.1.2.3', ['10.1.0.0/16'])).toBeNull();
    expect(refusedAddress('10.2.0.1', ['10.1.0.0/16'])).toBe('private address');
    expect(() =>
      createSafeFetch({ maxBytes: 1, maxRedirects: 0, acceptType: () => true, allow: ['not-an-ip'] }),
    ).toThrow(/not an IP/);
  });
});

describe('the guarded fetch', () => {
  it('fetches an allowed host, by address and by name (one DNS lookup, used for the connection)', async () => {
    const a = await get(`${host.baseUrl}/ok.png`);
    expect(a.mediaType).toBe('image/png');
    expect(a.data.equals(TINY_PNG)).toBe(true);
    lookups = [];
    const b = await get(`http://images.example.test:${host.port}/ok.png`);
    expect(b.data.equals(TINY_PNG)).toBe(true);
    expect(lookups).toEqual(['images.example.test']);
    expect(host.requests).toEqual(['/ok.png', '/ok.png']);
  });

  it.each([
    ['a loopback literal', () => `http://127.0.0.1:${sentinel.port}/ok.png`, /loopback/],
    ['a decimal loopback literal', () => `http://2130706433:${sentinel.port}/ok.png`, /loopback/],
    ['a hex loopback literal', () => `http://0x7f000001:${sentinel.port}/ok.png`, /loopback/],
    ['an IPv6 loopback literal', () => `http://[::1]:${sentinel.port}/ok.png`, /loopback/],
    ['an IPv4-mapped loopback', () => `http://[::ffff:127.0.0.1]:${sentinel.port}/ok.png`, /loopback/],
    ['the metadata address', () => 'http://169.254.169.254/latest/meta-data/', /linkLocal/],
    ['localhost (real DNS)', () => `http://localhost:${sentinel.port}/ok.png`, /loopback/],
    ['a name resolving to a private address', () => 'http://internal.example.test/ok.png', /private/],
    ['a name resolving to the metadata address', () => 'http://metadata.example.test/latest/meta-data/', /linkLocal/],
    [
      'a name with one public and one private address',
      () => `http://mixed.example.test:${host.port}/ok.png`,
      /private/,
    ],
    ['a name resolving to IPv6 loopback', () => `http://v6-loopback.example.test:${sentinel.port}/ok.png`, /loopback/],
    ['an unspecified address', () => `http://0.0.0.0:${sentinel.port}/ok.png`, /unspecified/],
    ['a non-http scheme', () => 'file:///etc/passwd', /scheme/],
    ['credentials in the URL', () => `http://user:pw@${PUBLIC}:${host.port}/ok.png`, /credentials/],
  ])('refuses %s, without connecting', async (_what, url, reason) => {
    await refused(url(), reason);
    expect(sentinel.requests).toEqual([]);
    expect(host.requests).toEqual([]);
  });

  it.each([
    ['a loopback address', () => `http://127.0.0.1:${sentinel.port}/ok.png`, /loopback/],
    ['localhost', () => `http://localhost:${sentinel.port}/ok.png`, /loopback/],
    ['the metadata address', () => 'http://169.254.169.254/latest/meta-data/iam/', /linkLocal/],
    ['a name resolving to a private address', () => 'http://internal.example.test/x.png', /private/],
    ['another scheme', () => 'file:///etc/passwd', /scheme/],
  ])('refuses a redirect to %s (each hop is checked)', async (_what, to, reason) => {
    await refused(`${host.baseUrl}/redirect?to=${encodeURIComponent(to())}`, reason);
    expect(host.requests).toHaveLength(1);
    expect(sentinel.requests).toEqual([]);
  });

  it('follows up to maxRedirects hops, and refuses one more', async () => {
    expect((await get(`${host.baseUrl}/hops?n=3`)).data.equals(TINY_PNG)).toBe(true);
    host.requests.length = 0;
    await refused(`${host.baseUrl}/hops?n=4`, /more than 3 redirects/);
    expect(host.requests).toHaveLength(4);
  });

  it('accepts a body of exactly maxBytes and refuses one byte more, declared or streamed', async () => {
    expect((await get(`${host.baseUrl}/img?type=image/png&bytes=${MAX}`)).data.length).toBe(MAX);
    await refused(`${host.baseUrl}/img?type=image/png&bytes=${MAX + 1}`, /over the limit/);
    expect((await get(`${host.baseUrl}/chunked?bytes=${MAX}`)).data.length).toBe(MAX);
    await refused(`${host.baseUrl}/chunked?bytes=${MAX + 1}`, /over the limit/);
  });

  it.each(['text/html', 'image/svg+xml', 'application/octet-stream'])('refuses content type %s', async (type) => {
    await refused(`${host.baseUrl}/img?type=${encodeURIComponent(type)}&bytes=10`, /content type/);
  });

  it('refuses an answer that is not 2xx', async () => {
    await refused(`${host.baseUrl}/missing`, /answered 404/);
  });
});

describe('reference images through Kiln', () => {
  let fake: FakeGemini;
  let kiln: Kiln;
  beforeAll(async () => {
    fake = await startFakeGemini();
    const gemini = fakeGeminiModel(fake, { timeoutMs: 10_000, maxAttempts: 2 });
    kiln = await startKiln({
      env: { REFERENCE_FETCH_ALLOW: PUBLIC },
      models: [
        { ...gemini, id: 'by-url' },
        { ...gemini, id: 'inline', inlineReferences: true, referenceMaxBytes: 1000 },
      ],
    });
  });
  afterAll(async () => {
    await kiln?.stop();
    await fake?.close();
  });
  beforeEach(() => fake.reset());

  const api = () => http(kiln.baseUrl, KEY_A);
  const withRefs = (...urls: string[]) =>
    submitBody('blend these', {
      contents: [
        {
          role: 'user',
          parts: [{ text: 'blend these' }, ...urls.map((data) => ({ inlineData: { mimeType: 'image/png', data } }))],
        },
      ],
    });
  async function run(model: string, ...urls: string[]) {
    const res = await api()(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: withRefs(...urls) });
    expect(res.status, res.text).toBe(202);
    return waitForStatus(() => api()(`/v1/tasks/${res.json.id}`), TERMINAL);
  }

  it('by default forwards reference URLs as they are, without fetching them', async () => {
    const url = `http://127.0.0.1:${sentinel.port}/private.png`;
    expect((await run('by-url', url)).status).toBe('succeeded');
    expect((fake.requests[0].body as any).contents[0].parts[1]).toEqual({
      inlineData: { mimeType: 'image/png', data: url },
    });
    expect(sentinel.requests).toEqual([]);
  });

  it('inlineReferences: downloads each reference and sends base64 with the served media type, in order', async () => {
    const task = await run(
      'inline',
      `${host.baseUrl}/ok.png`,
      `${host.baseUrl}/redirect?to=/img%3Ftype%3Dimage/webp%26bytes%3D1000`,
    );
    expect(task.status).toBe('succeeded');
    const parts = (fake.requests[0].body as any).contents[0].parts;
    expect(parts[0]).toEqual({ text: 'blend these' });
    expect(parts[1]).toEqual({ inlineData: { mimeType: 'image/png', data: TINY_PNG.toString('base64') } });
    expect(parts[2]).toEqual({
      inlineData: { mimeType: 'image/webp', data: Buffer.alloc(1000, 7).toString('base64') },
    });
    expect(fake.requests[0].raw).not.toContain(host.baseUrl);
  });

  it.each([
    ['a loopback reference', () => `http://127.0.0.1:${sentinel.port}/ok.png`, /loopback/],
    ['the metadata address', () => 'http://169.254.169.254/latest/meta-data/', /linkLocal/],
    [
      'a redirect to loopback',
      () => `${host.baseUrl}/redirect?to=${encodeURIComponent(`http://localhost:${sentinel.port}/ok.png`)}`,
      /loopback/,
    ],
    [
      'a reference over referenceMaxBytes',
      () => `${host.baseUrl}/img?type=image/png&bytes=1001`,
      /over the limit of 1000/,
    ],
    ['a reference that is not an image', () => `${host.baseUrl}/img?type=text/html&bytes=10`, /content type/],
    ['a missing reference', () => `${host.baseUrl}/missing`, /404/],
  ])('%s ends the task failed/invalid_request before any upstream call', async (_what, url, reason) => {
    const task = await run('inline', `${host.baseUrl}/ok.png`, url());
    expect(task.status).toBe('failed');
    expect(task.error.code).toBe('invalid_request');
    expect(task.error.message).toMatch(/^Reference image 2 cannot be used: /);
    expect(task.error.message).toMatch(reason);
    expect(fake.requests).toHaveLength(0);
    expect(sentinel.requests).toEqual([]);
  });
});
