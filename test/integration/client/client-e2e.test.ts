// The client SDK and the `kiln` CLI (spawned as `node bin/kiln.js …`) against a running Kiln with
// local providers, real Temporal and real Redis; short polling intervals configured.
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  imagesOf,
  Kiln as KilnClient,
  NotFoundError,
  TaskNotReadyError,
  chatTextOf,
  userMessage,
  videoUrlsOf,
  type PollProgress,
} from '../../../src/client/index.js';
import { drop, fail, ok, startFakeGemini, TINY_PNG, type FakeGemini } from '../providers/gemini/fake-gemini.js';
import { startKiln, KEY_A, type Kiln } from '../../support/kiln.js';

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47]);
const POLL = { firstCheckMs: 200, intervalMs: 200 };

let kiln: Kiln;
let fake: FakeGemini;
let out: string;

beforeAll(async () => {
  fake = await startFakeGemini();
  fake.setDefault((call) =>
    call.model === 'drop-me' ? drop() : call.model === 'broke' ? fail(402, 'no credit left') : ok(),
  );
  const gemini = {
    provider: 'gemini',
    baseUrl: fake.baseUrl,
    credential: 'passthrough',
    maxAttempts: 1,
    heartbeatTimeoutMs: 1000,
    timeoutMs: 5000,
  };
  kiln = await startKiln({
    env: { POLL_AFTER_SECONDS: '1' },
    models: [
      { id: 'kiln-image-1', provider: 'local', latencyMs: 300, idempotent: true },
      { id: 'img-slow', provider: 'local', latencyMs: 15_000, idempotent: true },
      { ...gemini, id: 'g-broke', upstreamModel: 'broke' },
      { ...gemini, id: 'g-drop', upstreamModel: 'drop-me', idempotent: false },
      { id: 'kiln-chat-1', kind: 'chat', provider: 'local' },
      { id: 'kiln-video-1', kind: 'video', provider: 'local', latencyMs: 500, pollIntervalMs: 100 },
    ],
  });
  out = mkdtempSync(join(tmpdir(), 'kiln-cli-'));
  writeFileSync(join(out, 'tiny.png'), TINY_PNG);
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});

const client = () => new KilnClient({ baseURL: kiln.baseUrl, apiKey: KEY_A, polling: POLL });

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  json: any;
}

function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  const fullEnv: Record<string, string | undefined> = {
    ...process.env,
    KILN_BASE_URL: kiln.baseUrl,
    KILN_API_KEY: KEY_A,
    KILN_POLL_FIRST_CHECK: '0.2',
    KILN_POLL_INTERVAL: '0.2',
    ...env,
  };
  for (const [k, v] of Object.entries(fullEnv)) if (v === undefined) delete fullEnv[k];
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/kiln.js', ...args], { env: fullEnv, timeout: 45_000 }, (err, stdout, stderr) => {
      let json: any = null;
      try {
        json = JSON.parse(stdout);
      } catch {
        /* text output */
      }
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr, json });
    });
  });
}

describe('client SDK', () => {
  it('submits, waits by the schedule (obeying the server Retry-After), and reads the image', async () => {
    const progress: PollProgress[] = [];
    // The schedule alone: long-polls are test/integration/tasks/wait.test.ts's.
    const scheduled = new KilnClient({ baseURL: kiln.baseUrl, apiKey: KEY_A, polling: { ...POLL, waitSeconds: 0 } });
    const task = await scheduled.tasks.createAndWait(
      { model: 'kiln-image-1', prompt: 'a lighthouse at dusk', aspectRatio: '16:9' },
      { onProgress: (p) => progress.push(p) },
    );
    expect(task.status).toBe('succeeded');
    // The first check is 200 ms after submit (the submit call itself takes part of that); then the
    // server's Retry-After: 1, longer than the 200 ms interval, wins.
    expect(progress[0].nextCheckInMs).toBeLessThanOrEqual(200);
    expect(progress.length).toBeGreaterThan(1);
    for (const p of progress.slice(1)) expect(p.nextCheckInMs).toBe(1000);
    const [img] = imagesOf(task);
    expect(img.kind).toBe('url');
    const url = (img as { url: string }).url;
    expect(await client().tasks.content(task.id)).toBe(url);
    const { bytes, contentType } = await client().download(url);
    expect(contentType).toBe('image/png');
    expect(Buffer.from(bytes.subarray(0, 4))).toEqual(PNG);
  });

  it('batch-waits, lists through the cursor, and types its errors', async () => {
    const c = client();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await c.tasks.create({ model: 'kiln-image-1', prompt: `fox ${i}` })).id);
    const done = await c.tasks.waitMany([...ids, 'task_00000000000000000000000000000000']);
    expect([...done.values()].map((t) => t.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'not_found']);
    const listed = [];
    for await (const t of c.tasks.list({ limit: 1 })) listed.push(t.id);
    // Pages of one, followed through the cursor, are exactly the one big page: no repeats, no gaps.
    const onePage = (await c.tasks.listPage({ limit: 100 })).items.map((t) => t.id);
    expect(listed).toEqual(onePage);
    expect(listed.slice(0, 3).sort()).toEqual([...ids].sort());

    await expect(c.tasks.get('task_00000000000000000000000000000000')).rejects.toBeInstanceOf(NotFoundError);
    const slow = await c.tasks.create({ model: 'img-slow', prompt: 'slow' });
    const notReady = await c.tasks.content(slow.id).catch((e) => e);
    expect(notReady).toBeInstanceOf(TaskNotReadyError);
    expect(notReady.status).toBe(409);
    expect(notReady.retryAfter).toBe(1);
    await expect(
      new KilnClient({ baseURL: kiln.baseUrl, apiKey: 'bad key with spaces' }).tasks.get(slow.id),
    ).rejects.toBeInstanceOf(AuthenticationError);
  });

  it('chat: text and an image in, text out', async () => {
    const completion = await client().chat.completions.create({
      model: 'kiln-chat-1',
      messages: [userMessage({ text: 'what is this?', images: [{ mimeType: 'image/png', bytes: TINY_PNG }] })],
    });
    const text = chatTextOf(completion);
    expect(text.length).toBeGreaterThan(0);
  });

  it('video: create, wait and download the file', async () => {
    const c = client();
    const video = await c.videos.createAndWait({ model: 'kiln-video-1', prompt: 'waves' });
    expect(video.status).toBe('completed');
    expect(videoUrlsOf(video).length).toBeGreaterThan(0);
    const [file] = await c.videos.download(video);
    const bytes = Buffer.from(await file.response.arrayBuffer());
    expect(bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
  });
});

describe('kiln CLI', () => {
  it('kiln image generates an image file (JSON output, exit 0)', async () => {
    const dir = join(out, 'image');
    const r = await cli(['image', 'a red fox in the snow', '--aspect', '16:9', '--out', dir, '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.json.task.status).toBe('succeeded');
    expect(r.json.files).toEqual([join(dir, `${r.json.task.id}.png`)]);
    expect(readFileSync(r.json.files[0]).subarray(0, 4)).toEqual(PNG);

    const get = await cli(['tasks', 'get', r.json.task.id, '--json']);
    expect(get.code).toBe(0);
    expect(get.json.status).toBe('succeeded');
    const content = await cli(['tasks', 'content', r.json.task.id, '--out', join(out, 'content')]);
    expect(content.code).toBe(0);
    expect(existsSync(content.stdout.trim())).toBe(true);
    const list = await cli(['tasks', 'list', '--json', '--limit', '5']);
    expect(list.json.map((t: any) => t.id)).toContain(r.json.task.id);
    const wait = await cli(['tasks', 'wait', r.json.task.id, '--json']);
    expect(wait.code).toBe(0);
    expect(wait.json.task.status).toBe('succeeded');
    const waitMany = await cli(['tasks', 'wait', r.json.task.id, 'task_00000000000000000000000000000000', '--json']);
    expect(waitMany.code).toBe(3);
    expect(waitMany.json.items.map((t: any) => t.status)).toEqual(['succeeded', 'not_found']);
  });

  it('text mode: prints the file path on stdout and a progress line per status on stderr', async () => {
    const r = await cli(['image', 'a quiet harbour', '--out', join(out, 'text')]);
    expect(r.code).toBe(0);
    const path = r.stdout.trim();
    expect(existsSync(path)).toBe(true);
    expect(r.stderr).toMatch(/image task_[0-9a-f]{32} accepted/);
  });

  it('exit 3 when the task fails, exit 4 when it ends uncertain, with the reason on stderr', async () => {
    const failed = await cli(['image', 'x', '--model', 'g-broke', '--out', out]);
    expect(failed.code).toBe(3);
    expect(failed.stderr).toMatch(/failed: insufficient_balance/);
    const uncertain = await cli(['image', 'x', '--model', 'g-drop', '--out', out, '--json']);
    expect(uncertain.code).toBe(4);
    expect(uncertain.json.task.status).toBe('uncertain');
  });

  it('exit 5 on the total timeout, naming the task id to resume with', async () => {
    const r = await cli(['image', 'slow', '--model', 'img-slow', '--timeout', '1.5', '--json']);
    expect(r.code).toBe(5);
    expect(r.json.error.code).toBe('timeout');
    expect(r.json.error.task_id).toMatch(/^task_/);
    expect(r.json.error.message).toContain(`kiln tasks wait ${r.json.error.task_id}`);
  });

  it('Ctrl-C stops waiting (exit 130) and names the task, which goes on', async () => {
    const child = spawn(process.execPath, ['bin/kiln.js', 'image', 'slow', '--model', 'img-slow'], {
      env: {
        ...process.env,
        KILN_BASE_URL: kiln.baseUrl,
        KILN_API_KEY: KEY_A,
        KILN_POLL_FIRST_CHECK: '0.2',
        KILN_POLL_INTERVAL: '0.2',
      },
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    await new Promise<void>((resolve) => {
      const t = setInterval(() => {
        if (/accepted/.test(stderr)) {
          clearInterval(t);
          resolve();
        }
      }, 50);
    });
    child.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(130);
    const id = /kiln tasks wait (task_[0-9a-f]{32})/.exec(stderr)?.[1];
    expect(id).toBeDefined();
    expect((await client().tasks.get(id!)).status).toMatch(/^(accepted|queued|running)$/);
  });

  it('helpful errors and exit codes: API error 1, usage 2, unreachable 6', async () => {
    const unknown = await cli(['image', 'x', '--model', 'nope', '--json']);
    expect(unknown.code).toBe(1);
    expect(unknown.json.error).toMatchObject({ code: 'model_not_found', status: 404 });
    const tooLong = await cli(['image', 'x'.repeat(4001)]);
    expect(tooLong.code).toBe(1);
    expect(tooLong.stderr).toContain('prompt_too_long');
    const noKey = await cli(['tasks', 'list'], { KILN_API_KEY: undefined });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain('KILN_API_KEY');
    const badFlag = await cli(['tasks', 'list', '--limit', 'many']);
    expect(badFlag.code).toBe(2);
    const down = await cli(['tasks', 'list'], { KILN_BASE_URL: 'http://127.0.0.1:9' });
    expect(down.code).toBe(6);
    expect(down.stderr).toContain('cannot reach Kiln');
  });

  it('kiln chat answers with text, an image file attached as a data URI', async () => {
    const r = await cli(['chat', 'describe this', '--image', join(out, 'tiny.png'), '--json']);
    expect(r.code).toBe(0);
    expect(r.json.text.length).toBeGreaterThan(0);
    expect(r.json.text).toBe(chatTextOf(r.json.completion));
  });

  it('kiln chat --stream prints the answer as it arrives', async () => {
    const streamed = await cli(['chat', 'stream this please', '--stream', '--seed', '3']);
    expect(streamed.code).toBe(0);
    const whole = await cli(['chat', 'stream this please', '--seed', '3']);
    expect(streamed.stdout.trim().length).toBeGreaterThan(0);
    expect(streamed.stdout).toBe(whole.stdout);
  });

  it('kiln keys create|list|revoke (keys mode): an issued key works until revoked', async () => {
    const keyed = await startKiln({ workers: false, env: { AUTH_MODE: 'keys' } });
    try {
      const admin = {
        REDIS_URL: keyed.env.REDIS_URL,
        REDIS_PREFIX: keyed.env.REDIS_PREFIX,
        KILN_SECRET: keyed.env.KILN_SECRET,
        AUTH_MODE: 'keys',
      };
      const created = await cli(['keys', 'create', '--owner', 'alice', '--json'], admin);
      expect(created.code).toBe(0);
      const key = created.json.key as string;
      const listed = await cli(['keys', 'list', '--json'], admin);
      expect(listed.json.map((k: any) => k.owner)).toEqual(['alice']);
      const use = await cli(['tasks', 'list', '--json'], { KILN_BASE_URL: keyed.baseUrl, KILN_API_KEY: key });
      expect(use.code).toBe(0);
      expect(use.json).toEqual([]);
      expect((await cli(['keys', 'revoke', key], admin)).code).toBe(0);
      // The API caches a key's lookup for 5 s; revocation shows after that.
      await new Promise((r) => setTimeout(r, 5_200));
      const refused = await cli(['tasks', 'list', '--json'], { KILN_BASE_URL: keyed.baseUrl, KILN_API_KEY: key });
      expect(refused.code).toBe(1);
      expect(refused.json.error).toMatchObject({ code: 'invalid_api_key', status: 401 });
    } finally {
      await keyed.stop();
    }
  });

  it('kiln video generates a video file', async () => {
    const dir = join(out, 'video');
    const r = await cli(['video', 'waves at night', '--out', dir, '--json']);
    expect(r.code).toBe(0);
    expect(r.json.video.status).toBe('completed');
    expect(readFileSync(r.json.files[0]).subarray(4, 8).toString('latin1')).toBe('ftyp');
  });
});
