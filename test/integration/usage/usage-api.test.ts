// Usage and limits over HTTP (src/usage/routes.ts) on a real Kiln in keys mode with workers: the
// caller's usage after real image tasks and its owner scope, every date and range rule at its edge
// and one past it, the operators' report as JSON and CSV (row for row the same), an owner's limits,
// keys with limits, the release of an uncertain task's held units, the same in passthrough mode,
// and the CLI commands over them.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownerOfKey } from '../../../src/infra/callers.js';
import { createQuota } from '../../../src/usage/settlement.js';
import { MAX_LIMIT } from '../../../src/config/limits.js';
import { dayOf, type QuotaStore } from '../../../src/usage/store.js';
import { admin, OPERATOR_TOKEN, runCli } from '../../support/keys.js';
import { eventually, http, KEY_A, KEY_B, startKiln, submitBody, waitForStatus, type Kiln } from '../../support/kiln.js';

const MODELS = [
  { id: 'img', provider: 'local', latencyMs: 20, idempotent: true, units: 3 },
  { id: 'img-b', provider: 'local', latencyMs: 20, idempotent: true, units: 1 },
];
const DEFAULT_DAILY = 1000;
const COUNTERS = ['submitted', 'succeeded', 'failed', 'canceled', 'uncertain', 'released', 'units', 'upstream_seconds'];

let kiln: Kiln;
let quota: QuotaStore;
beforeAll(async () => {
  kiln = await startKiln({
    env: { AUTH_MODE: 'keys', KILN_OPERATOR_TOKEN: OPERATOR_TOKEN, OWNER_DAILY_UNITS: String(DEFAULT_DAILY) },
    models: MODELS,
  });
  quota = createQuota(kiln.config, kiln.api.redis);
}, 120_000);
afterAll(async () => {
  await kiln?.stop();
});

const op = () => admin(kiln.baseUrl);
const as = (key: string) => http(kiln.baseUrl, key);
async function newKey(body: object): Promise<any> {
  const r = await op()('/admin/v1/keys', { method: 'POST', json: body });
  expect(r.status, r.text).toBe(201);
  return r.json;
}
const submit = (key: string, model = 'img') =>
  as(key)(`/v1beta/models/${model}:generateContent`, { method: 'POST', json: submitBody() });
async function run(key: string, model = 'img'): Promise<string> {
  const r = await submit(key, model);
  expect(r.status, r.text).toBe(202);
  await waitForStatus(() => as(key)(`/v1/tasks/${r.json.id}`), 'succeeded');
  return r.json.id;
}

const DAY_MS = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const today = () => iso(Date.now());
const shift = (date: string, days: number) => iso(Date.parse(`${date}T00:00:00Z`) + days * DAY_MS);
const zero = Object.fromEntries(COUNTERS.map((c) => [c, 0]));
const taskId = () => `task_${randomBytes(16).toString('hex')}`;

/** RFC 4180 (quoted fields with doubled quotes, CRLF records) into rows of fields. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      row.push(field);
      field = '';
    } else if (ch === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else field += ch;
  }
  expect(field, 'the CSV ends with CRLF').toBe('');
  return rows;
}

/** Owners of the first test: alpha runs 2 `img` (3 units each) and 1 `img-b` (1 unit), beta 1 `img`. */
let alpha: any;
let beta: any;
let alphaTasks: string[] = [];

describe('GET /v1/usage', () => {
  it("counts the caller's real image tasks per day and model, and only the caller's", async () => {
    alpha = await newKey({ owner: 'u-alpha' });
    beta = await newKey({ owner: 'u-beta' });
    const alpha2 = await newKey({ owner: 'u-alpha', label: 'second key' });
    const idle = await newKey({ owner: 'u-idle' });
    alphaTasks = await Promise.all([run(alpha.key), run(alpha.key), run(alpha2.key, 'img-b')]);
    await run(beta.key);
    const day = today();
    // Settlement follows the terminal write: read until it is in.
    const r = await eventually(
      () => as(alpha.key)('/v1/usage'),
      (x) => x.json?.total?.succeeded === 3,
    );
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const counts = (c: object) => ({ ...zero, upstream_seconds: expect.any(Number), ...c });
    expect(r.json).toEqual({
      object: 'usage',
      from: shift(day, -29),
      to: day,
      group_by: 'day',
      data: [{ date: day, ...counts({ submitted: 3, succeeded: 3, units: 7 }) }],
      total: counts({ submitted: 3, succeeded: 3, units: 7 }),
    });
    expect(Object.keys(r.json.data[0])).toEqual(['date', ...COUNTERS]);

    const byModel = (await as(alpha.key)('/v1/usage?group_by=model')).json;
    expect(byModel.data).toEqual([
      { model: 'img', ...counts({ submitted: 2, succeeded: 2, units: 6 }) },
      { model: 'img-b', ...counts({ submitted: 1, succeeded: 1, units: 1 }) },
    ]);
    expect(Object.keys(byModel.data[0])).toEqual(['model', ...COUNTERS]);
    const both = (await as(alpha.key)('/v1/usage?group_by=day,model')).json;
    expect(both.data.map((x: any) => [x.date, x.model, x.units])).toEqual([
      [day, 'img', 6],
      [day, 'img-b', 1],
    ]);
    expect(both.total).toEqual(r.json.total);
    // Every key of the owner sees the owner's usage; other owners see only theirs.
    expect((await as(alpha2.key)('/v1/usage?group_by=day,model')).json).toEqual(both);
    const b = await eventually(
      () => as(beta.key)('/v1/usage?group_by=day,model'),
      (x) => x.json?.total?.succeeded === 1,
    );
    expect(b.json.data).toEqual([{ date: day, model: 'img', ...counts({ submitted: 1, succeeded: 1, units: 3 }) }]);
    const none = (await as(idle.key)('/v1/usage')).json;
    expect([none.data, none.total]).toEqual([[], zero]);
    // An API key is no operator.
    const r401 = await admin(kiln.baseUrl, alpha.key)('/admin/v1/usage');
    expect([r401.status, r401.json.error.code]).toEqual([401, 'missing_api_key']);
    expect((await http(kiln.baseUrl, null)('/v1/usage')).status).toBe(401);
  });

  it('refuses malformed and impossible dates, inverted and too long ranges: each at its edge and one past it', async () => {
    const day = today();
    const ok: [string, string, string][] = [
      [`from=${shift(day, -399)}`, shift(day, -399), day],
      [`from=${day}`, day, day],
      [`to=2025-12-31`, '2025-12-02', '2025-12-31'],
      [`from=2024-02-29&to=2024-02-29`, '2024-02-29', '2024-02-29'],
      [`from=2025-01-01&to=${shift('2025-01-01', 399)}`, '2025-01-01', shift('2025-01-01', 399)],
      [`from=2026-03-01&to=2026-03-01&group_by=day,model`, '2026-03-01', '2026-03-01'],
    ];
    for (const path of ['/v1/usage', '/admin/v1/usage']) {
      const get = path === '/v1/usage' ? as(alpha.key) : op();
      for (const [q, from, to] of ok) {
        const r = await get(`${path}?${q}`);
        expect([r.status, r.json.from, r.json.to], `${path}?${q}: ${r.text}`).toEqual([200, from, to]);
      }
      const bad: [string, RegExp][] = [
        [`from=${shift(day, -400)}`, /^query: .* is 401 days; a report covers at most 400 days/],
        [`from=2025-01-01&to=${shift('2025-01-01', 400)}`, /is 401 days/],
        [`from=${shift(day, 1)}`, /^query\.from: .* is after query\.to \(.*, today\)/],
        ['from=2026-03-02&to=2026-03-01', /^query\.from: 2026-03-02 is after query\.to \(2026-03-01\)/],
        ['from=2026-02-30', /^query\.from: is not a day of the calendar/],
        ['from=2025-02-29', /^query\.from: is not a day of the calendar/],
        ['to=2026-13-01', /^query\.to: is not a day of the calendar/],
        ['to=2026-04-31', /^query\.to: is not a day of the calendar/],
        ['from=2026-1-05', /^query\.from: must be a date YYYY-MM-DD/],
        ['from=20260105', /^query\.from: must be a date YYYY-MM-DD/],
        ['to=yesterday', /^query\.to: must be a date YYYY-MM-DD/],
        ['group_by=week', /^query\.group_by: must be one of day \| model \| day,model/],
        ['group_by=model,day', /^query\.group_by: must be one of/],
        ['group_by=', /^query\.group_by: must be one of/],
      ];
      for (const [q, message] of bad) {
        const r = await get(`${path}?${q}`);
        expect([r.status, r.json?.error?.code], `${path}?${q}`).toEqual([400, 'invalid_request']);
        expect(r.json.error.message, `${path}?${q}`).toMatch(message);
      }
    }
  });
});

describe('GET /admin/v1/usage', () => {
  it("reports every owner's usage with its name, or one owner's; the CSV is the JSON row for row", async () => {
    const day = today();
    // Odd names to quote: a model id and an owner (not of keys mode) with commas, quotes and a line break.
    const odd = 'odd,"model"\r\nx';
    for (const [owner, model] of [
      ['key:u-csv', odd],
      ['plain"owner, raw', 'img'],
    ]) {
      const id = taskId();
      await quota.admit({ owner, id, model, units: 2, chargeFailed: false });
      expect(await quota.settle(owner, id, 'succeeded', true, 1500)).toBe('charged');
    }
    const all = (await op()('/admin/v1/usage?group_by=day,model')).json;
    expect(all).toMatchObject({ object: 'usage', from: shift(day, -29), to: day, group_by: 'day,model', owner: null });
    expect(all.data.map((r: any) => [r.owner, r.model])).toEqual(
      expect.arrayContaining([
        ['u-alpha', 'img'],
        ['u-alpha', 'img-b'],
        ['u-beta', 'img'],
        ['u-csv', odd],
        ['plain"owner, raw', 'img'],
      ]),
    );
    expect(all.data.find((r: any) => r.owner === 'u-csv')).toMatchObject({ units: 2, upstream_seconds: 1.5 });
    // Sorted by date, owner, model; only rows with a count.
    const keys = all.data.map((r: any) => `${r.date}|${r.owner}|${r.model}`);
    expect(keys).toEqual([...keys].sort());
    expect(all.data.some((r: any) => r.owner === 'u-idle')).toBe(false);
    expect(all.total.succeeded).toBe(all.data.reduce((n: number, r: any) => n + r.succeeded, 0));

    const own = (await as(alpha.key)('/v1/usage?group_by=day,model')).json;
    const one = (await op()('/admin/v1/usage?group_by=day,model&owner=u-alpha')).json;
    expect(one.owner).toBe('u-alpha');
    expect(one.data).toEqual(own.data.map((r: any) => ({ date: r.date, owner: 'u-alpha', ...r })));
    expect(Object.keys(one.data[0])).toEqual(['date', 'owner', 'model', ...COUNTERS]);
    expect(one.total).toEqual(own.total);

    for (const groupBy of ['day', 'model', 'day,model']) {
      const json = (await op()(`/admin/v1/usage?group_by=${groupBy}`)).json;
      const viaFormat = await op()(`/admin/v1/usage?group_by=${groupBy}&format=csv`);
      const viaAccept = await op()(`/admin/v1/usage?group_by=${groupBy}`, { headers: { accept: 'text/csv' } });
      for (const r of [viaFormat, viaAccept]) {
        expect(r.status).toBe(200);
        expect(r.headers.get('content-type')).toBe('text/csv; charset=utf-8');
        expect(r.text).toBe(viaFormat.text);
      }
      const [header, ...rows] = parseCsv(viaFormat.text);
      const columns = [...(groupBy !== 'model' ? ['date'] : []), 'owner', ...(groupBy !== 'day' ? ['model'] : [])];
      expect(header).toEqual([...columns, ...COUNTERS]);
      expect(rows).toEqual(json.data.map((r: any) => header.map((c) => String(r[c]))));
      expect(rows.length).toBe(json.data.length);
    }
    expect(parseCsv((await op()('/admin/v1/usage?owner=u-beta&format=csv')).text)).toEqual([
      ['date', 'owner', ...COUNTERS],
      [day, 'u-beta', '1', '1', '0', '0', '0', '0', '3', expect.stringMatching(/^\d+(\.\d+)?$/)],
    ]);

    for (const [q, message] of [
      ['owner=a%20b', /^query\.owner: must be an owner name of API keys/],
      [`owner=${'o'.repeat(65)}`, /^query\.owner: /],
      ['format=xml', /^query\.format: must be json or csv/],
    ] as const) {
      const r = await op()(`/admin/v1/usage?${q}`);
      expect([r.status, r.json.error.code, r.json.error.message], q).toEqual([
        400,
        'invalid_request',
        expect.stringMatching(message),
      ]);
    }
    const nobody = (await op()(`/admin/v1/usage?owner=${'o'.repeat(64)}`)).json;
    expect([nobody.data, nobody.total]).toEqual([[], zero]);
    const r = await admin(kiln.baseUrl, null)('/admin/v1/usage?format=csv');
    expect([r.status, r.json.error.code]).toEqual([401, 'missing_api_key']);
  });
});

describe('owner limits', () => {
  const path = (owner: string) => `/admin/v1/owners/${owner}/limits`;
  const patch = (owner: string, json: unknown) => op()(path(owner), { method: 'PATCH', json });
  const defaults = { max_unfinished: null, submits_per_minute: null, daily_units: DEFAULT_DAILY, monthly_units: null };

  it('GET and PATCH: a number, null (no limit, over a default) and "default"; the next submit obeys them', async () => {
    const fresh = await op()(path('u-lim'));
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.json).toEqual({ object: 'owner.limits', owner: 'u-lim', limits: defaults, own: {}, defaults });
    expect(fresh.headers.get('cache-control')).toBe('no-store');

    const set = await patch('u-lim', { daily_units: 3, max_unfinished: null, monthly_units: MAX_LIMIT });
    expect(set.status, set.text).toBe(200);
    expect(set.json).toEqual({
      object: 'owner.limits',
      owner: 'u-lim',
      limits: { max_unfinished: null, submits_per_minute: null, daily_units: 3, monthly_units: MAX_LIMIT },
      own: { max_unfinished: null, daily_units: 3, monthly_units: MAX_LIMIT },
      defaults,
    });
    expect((await op()(path('u-lim'))).json).toEqual(set.json);
    const { key } = await newKey({ owner: 'u-lim' });
    expect((await submit(key)).status).toBe(202);
    const refused = await submit(key);
    expect([refused.status, refused.json.error.code]).toEqual([429, 'quota_exceeded']);
    expect(refused.json.error.message).toContain('daily_units');

    const back = await patch('u-lim', { daily_units: 'default', monthly_units: 'default' });
    expect(back.json.own).toEqual({ max_unfinished: null });
    expect(back.json.limits).toEqual({ ...defaults, max_unfinished: null });
    expect((await submit(key)).status).toBe(202);
    const off = await patch('u-lim', { daily_units: null });
    expect(off.json.own).toEqual({ max_unfinished: null, daily_units: null });
    expect(off.json.limits.daily_units).toBeNull();
    expect((await patch('u-lim', {})).json).toEqual(off.json);
    // The owner's 64 characters at the edge.
    expect((await op()(path('o'.repeat(64)))).status).toBe(200);

    const bad: [unknown, RegExp][] = [
      [{ daily_units: -1 }, /^body\.daily_units: must be at least 0/],
      [{ daily_units: 1.5 }, /^body\.daily_units: /],
      [{ daily_units: MAX_LIMIT + 1 }, new RegExp(`^body\\.daily_units: must be at most ${MAX_LIMIT}`)],
      [
        { daily_units: 'none' },
        /^body\.daily_units: must be a whole number from 0 to .*, null \(no limit\) or "default"/,
      ],
      [{ daily_units: '5' }, /^body\.daily_units: /],
      [{ daily: 5 }, /^body: Unrecognized key: "daily"/],
      [[], /^body: /],
    ];
    for (const [body, message] of bad) {
      const r = await patch('u-lim', body);
      expect([r.status, r.json?.error?.code], JSON.stringify(body)).toEqual([400, 'invalid_request']);
      expect(r.json.error.message, JSON.stringify(body)).toMatch(message);
    }
    for (const owner of ['a%20b', 'o'.repeat(65), 'key%3Au-lim']) {
      const r = await op()(path(owner));
      expect([r.status, r.json.error.message], owner).toEqual([400, expect.stringMatching(/^params\.owner: /)]);
    }
    // Nothing changed by the refusals.
    expect((await op()(path('u-lim'))).json).toEqual(off.json);
    const r = await admin(kiln.baseUrl, key)(path('u-lim'), { method: 'PATCH', json: { daily_units: 1 } });
    expect([r.status, r.json.error.code]).toEqual([401, 'missing_api_key']);
  });
});

describe('keys with limits', () => {
  it('POST and PATCH /admin/v1/keys take limits; the key view shows all four; the key obeys them', async () => {
    const plain = await newKey({ owner: 'u-keylim' });
    const none = { max_unfinished: null, submits_per_minute: null, daily_units: null, monthly_units: null };
    expect(plain.limits).toEqual(none);
    const k = await newKey({ owner: 'u-keylim', limits: { submits_per_minute: 1, daily_units: 50 } });
    expect(k.limits).toEqual({ ...none, submits_per_minute: 1, daily_units: 50 });
    expect((await op()(`/admin/v1/keys/${k.id}`)).json.limits).toEqual(k.limits);
    expect((await submit(k.key)).status).toBe(202);
    const refused = await submit(k.key);
    expect([refused.status, refused.json.error.code]).toEqual([429, 'rate_limited']);
    expect(refused.json.error.message).toContain("This API key's");
    // The owner's other key is not held back by this key's limit.
    expect((await submit(plain.key)).status).toBe(202);

    const changed = await op()(`/admin/v1/keys/${k.id}`, {
      method: 'PATCH',
      json: { limits: { submits_per_minute: null, max_unfinished: 5 } },
    });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.json.limits).toEqual({ ...none, max_unfinished: 5, daily_units: 50 });
    // Every API process re-reads a key within a second.
    const ok = await eventually(
      () => submit(k.key),
      (r) => r.status === 202,
      5000,
    );
    expect(ok.status).toBe(202);
    for (const [body, message] of [
      [{ owner: 'x', limits: { daily: 1 } }, /^body\.limits: Unrecognized key: "daily"/],
      [{ owner: 'x', limits: { daily_units: -1 } }, /^body\.limits\.daily_units: must be at least 0/],
      [{ owner: 'x', limits: { daily_units: 'default' } }, /^body\.limits\.daily_units: /],
      [{ owner: 'x', limits: null }, /^body\.limits: /],
    ] as const) {
      const r = await op()('/admin/v1/keys', { method: 'POST', json: body });
      expect([r.status, r.json.error.message], JSON.stringify(body)).toEqual([400, expect.stringMatching(message)]);
    }
    const r = await op()(`/admin/v1/keys/${k.id}`, { method: 'PATCH', json: { limits: { monthly_units: 2.5 } } });
    expect([r.status, r.json.error.message]).toEqual([400, expect.stringMatching(/^body\.limits\.monthly_units: /)]);
  });
});

describe('POST /admin/v1/tasks/{id}/release', () => {
  const release = (id: string, owner?: string) =>
    op()(`/admin/v1/tasks/${id}/release${owner ? `?owner=${owner}` : ''}`, { method: 'POST' });

  it('404 for an unknown task, 409 not_held for a succeeded one, 400 for another owner', async () => {
    const unknown = taskId();
    const r = await release(unknown);
    expect([r.status, r.json.error.code]).toEqual([404, 'not_found']);
    expect(r.json.error.message).toMatch(/its record may have expired.*\?owner=/);
    const named = await release(unknown, 'u-alpha');
    expect([named.status, named.json.error.code, named.json.error.message]).toEqual([
      404,
      'not_found',
      expect.stringContaining('No reservation for task'),
    ]);
    const done = alphaTasks[0];
    const held = await release(done);
    expect([held.status, held.json.error.code]).toEqual([409, 'not_held']);
    expect(held.json.error.message).toMatch(/holds no units to release: it succeeded/);
    expect((await release(done, 'u-alpha')).status).toBe(409);
    const other = await release(done, 'u-beta');
    expect([other.status, other.json.error.message]).toEqual([
      400,
      expect.stringMatching(/^query\.owner: task .* belongs to "u-alpha", not "u-beta"/),
    ]);
    for (const [id, q] of [
      ['bad%20id', ''],
      [unknown, '?owner=a%20b'],
    ])
      expect((await op()(`/admin/v1/tasks/${id}/release${q}`, { method: 'POST' })).status, id + q).toBe(400);
    const anon = await admin(kiln.baseUrl, alpha.key)(`/admin/v1/tasks/${done}/release`, { method: 'POST' });
    expect(anon.status).toBe(401);
  });

  it("releases an uncertain task's held units: back in the owner's quota, out of the ledger's units", async () => {
    const owner = 'key:u-held';
    expect((await op()('/admin/v1/owners/u-held/limits', { method: 'PATCH', json: { daily_units: 5 } })).status).toBe(
      200,
    );
    const id = taskId();
    expect(await quota.admit({ owner, id, model: 'img', units: 5, chargeFailed: false })).toEqual({
      admitted: true,
      fresh: true,
    });
    expect(await quota.settle(owner, id, 'uncertain', true, 0)).toBe('held');
    // The held units count against the day's quota.
    const probe = { owner, id: taskId(), model: 'img', units: 1, chargeFailed: false };
    expect(await quota.admit(probe)).toMatchObject({ admitted: false, code: 'quota_exceeded', limit: 'daily_units' });
    const day = dayOf(Date.now());
    expect((await quota.usage(owner, [day])).get(day)?.get('img')).toMatchObject({ uncertain: 1, units: 5 });

    // No record in the read model: the owner must be named.
    expect((await release(id)).status).toBe(404);
    const r = await release(id, 'u-held');
    expect(r.status, r.text).toBe(200);
    expect(r.json).toEqual({ id, object: 'task.release', released: true });
    expect((await quota.usage(owner, [day])).get(day)?.get('img')).toMatchObject({
      submitted: 1,
      uncertain: 1,
      released: 1,
      units: 0,
    });
    expect((await quota.reservations(owner)).map((x) => x.id)).not.toContain(id);
    expect(await quota.admit(probe)).toEqual({ admitted: true, fresh: true });
    const report = (await op()('/admin/v1/usage?owner=u-held&group_by=model')).json;
    expect(report.data).toEqual([
      { owner: 'u-held', model: 'img', ...zero, submitted: 2, uncertain: 1, released: 1, units: 0 },
    ]);
    // Released once: nothing is held any more.
    expect((await release(id, 'u-held')).status).toBe(404);

    // A reservation not settled yet holds nothing to release.
    const running = taskId();
    await quota.admit({ owner, id: running, model: 'img', units: 1, chargeFailed: false });
    const busy = await release(running, 'u-held');
    expect([busy.status, busy.json.error.code, busy.json.error.message]).toEqual([
      409,
      'not_held',
      expect.stringMatching(/holds no units to release: it has not finished/),
    ]);
    await quota.void(owner, running);
    await quota.void(owner, probe.id);
  });
});

describe('passthrough mode', () => {
  it('names owners by their id: /v1/usage per key, the admin report, limits and releases by id', async () => {
    const pass = await startKiln({ workers: false, env: { KILN_OPERATOR_TOKEN: OPERATOR_TOKEN } });
    try {
      const q = createQuota(pass.config, pass.api.redis);
      const ownerA = ownerOfKey(pass.config.ownerKey, KEY_A);
      const id = taskId();
      await q.admit({ owner: ownerA, id, model: 'kiln-image-1', units: 1, chargeFailed: false });
      expect(await q.settle(ownerA, id, 'succeeded', true, 2000)).toBe('charged');
      const day = today();
      const mine = (await http(pass.baseUrl, KEY_A)('/v1/usage?group_by=day,model')).json;
      expect(mine.data).toEqual([
        { date: day, model: 'kiln-image-1', ...zero, submitted: 1, succeeded: 1, units: 1, upstream_seconds: 2 },
      ]);
      expect((await http(pass.baseUrl, KEY_B)('/v1/usage')).json.data).toEqual([]);
      const api = admin(pass.baseUrl);
      const all = (await api('/admin/v1/usage')).json;
      expect(all.data).toEqual([
        { date: day, owner: ownerA, ...zero, submitted: 1, succeeded: 1, units: 1, upstream_seconds: 2 },
      ]);
      expect((await api(`/admin/v1/usage?owner=${ownerA}`)).json.data).toEqual(all.data);
      const named = await api('/admin/v1/usage?owner=acme');
      expect([named.status, named.json.error.message]).toEqual([
        400,
        expect.stringMatching(/^query\.owner: must be an owner id, 64 lowercase hex digits/),
      ]);
      const limits = await api(`/admin/v1/owners/${ownerA}/limits`, { method: 'PATCH', json: { max_unfinished: 2 } });
      expect(limits.json).toMatchObject({ owner: ownerA, own: { max_unfinished: 2 } });
      expect((await api('/admin/v1/owners/acme/limits')).status).toBe(400);
      expect((await api(`/admin/v1/tasks/${taskId()}/release?owner=${ownerA}`, { method: 'POST' })).status).toBe(404);
    } finally {
      await pass.stop();
    }
  });
});

describe('the CLI', () => {
  const userEnv = (key: string) => ({ KILN_BASE_URL: kiln.baseUrl, KILN_API_KEY: key });
  const opEnv = () => ({ KILN_BASE_URL: kiln.baseUrl, KILN_OPERATOR_TOKEN: OPERATOR_TOKEN });

  it('kiln usage and kiln admin usage: a table, JSON, CSV', async () => {
    const api = (await as(alpha.key)('/v1/usage?group_by=day,model')).json;
    const json = await runCli(['usage', '--group-by', 'day,model', '--json'], userEnv(alpha.key));
    expect(json.code, json.stderr).toBe(0);
    expect(json.json).toEqual(api);
    const text = await runCli(['usage', '--group-by', 'day,model'], userEnv(alpha.key));
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0].split(/\s+/)).toEqual(['date', 'model', ...COUNTERS.slice(0, -1), 'upstream_s']);
    expect(lines[1].split(/\s+/).slice(0, 3)).toEqual([today(), 'img', '2']);
    expect(lines[lines.length - 1].split(/\s+/).slice(0, 2)).toEqual(['total', '3']);
    expect(text.stderr).toContain(`usage ${api.from} to ${api.to} by day,model`);
    const bad = await runCli(['usage', '--group-by', 'week'], userEnv(alpha.key));
    expect([bad.code, bad.stderr]).toEqual([1, expect.stringContaining('query.group_by: must be one of')]);
    const range = await runCli(['usage', '--from', '2026-02-30'], userEnv(alpha.key));
    expect([range.code, range.stderr]).toEqual([1, expect.stringContaining('is not a day of the calendar')]);

    const csv = await runCli(['admin', 'usage', '--owner', 'u-alpha', '--group-by', 'model', '--csv'], opEnv());
    expect(csv.code, csv.stderr).toBe(0);
    expect(csv.stdout).toBe((await op()('/admin/v1/usage?owner=u-alpha&group_by=model&format=csv')).text);
    const adminJson = await runCli(['admin', 'usage', '--json'], opEnv());
    expect(adminJson.json).toEqual((await op()('/admin/v1/usage')).json);
    const adminText = await runCli(['admin', 'usage', '--owner', 'u-beta'], opEnv());
    expect(adminText.stdout.split('\n')[1].split(/\s+/).slice(0, 4)).toEqual([today(), 'u-beta', '1', '1']);
    expect((await runCli(['admin', 'usage', '--csv', '--json'], opEnv())).code).toBe(2);
  });

  it('kiln admin limits show | set, keys with limits, tasks release', async () => {
    const cli = (...args: string[]) => runCli(['admin', ...args], opEnv());
    const set = await cli('limits', 'set', 'u-cli', '--daily-units', '7', '--max-unfinished', 'none', '--json');
    expect(set.code, set.stderr + set.stdout).toBe(0);
    expect(set.json).toMatchObject({ owner: 'u-cli', own: { daily_units: 7, max_unfinished: null } });
    const back = await cli('limits', 'set', 'u-cli', '--daily-units', 'default', '--json');
    expect(back.json.own).toEqual({ max_unfinished: null });
    const shown = await cli('limits', 'show', 'u-cli');
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/^owner u-cli\n/);
    expect(shown.stdout).toMatch(/max_unfinished +none +\(own; the default is none\)/);
    expect(shown.stdout).toMatch(new RegExp(`daily_units +${DEFAULT_DAILY} +\\(default\\)`));
    expect((await cli('limits', 'set', 'u-cli')).code).toBe(2);
    expect((await cli('limits', 'set', 'u-cli', '--daily-units', 'lots')).code).toBe(2);
    const badOwner = await cli('limits', 'show', 'a b');
    expect([badOwner.code, badOwner.stderr]).toEqual([1, expect.stringContaining('params.owner')]);

    const made = await cli('keys', 'create', '--owner', 'u-clikey', '--daily-units', '5', '--json');
    expect(made.code, made.stderr).toBe(0);
    expect(made.json.limits).toEqual({
      max_unfinished: null,
      submits_per_minute: null,
      daily_units: 5,
      monthly_units: null,
    });
    const upd = await cli(
      'keys',
      'update',
      made.json.id,
      '--daily-units',
      'none',
      '--submits-per-minute',
      '9',
      '--json',
    );
    expect(upd.json.limits).toMatchObject({ daily_units: null, submits_per_minute: 9 });
    expect((await cli('keys', 'show', made.json.id)).stdout).toContain('  limits=submits_per_minute=9');
    expect((await cli('keys', 'create', '--owner', 'u-clikey', '--daily-units', 'none')).code).toBe(2);

    const missing = await cli('tasks', 'release', taskId(), '--owner', 'u-alpha');
    expect([missing.code, missing.stderr]).toEqual([1, expect.stringContaining('No reservation for task')]);
    const notHeld = await cli('tasks', 'release', alphaTasks[0]);
    expect([notHeld.code, notHeld.stderr]).toEqual([1, expect.stringContaining('holds no units')]);
    const owner = 'key:u-clirel';
    const id = taskId();
    await quota.admit({ owner, id, model: 'img', units: 2, chargeFailed: false });
    await quota.settle(owner, id, 'uncertain', true, 0);
    const released = await cli('tasks', 'release', id, '--owner', 'u-clirel');
    expect([released.code, released.stdout.trim()]).toEqual([0, `released ${id}`]);
  });
});
