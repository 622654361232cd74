// Video tasks end to end: the official OpenAI SDK against a running Kiln, the local MP4 (ffprobe +
// Chromium), the pro model's strict rules (a fake upstream proves nothing was sent), owner scoping
// and image/video kinds kept apart. Upstream providers: providers/openai-videos/ and
// providers/workflow-node/.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MODELS } from '../../../src/config/default-models.js';
import { videoOptions, type VideoModel } from '../../../src/config/models.js';
import type { FakeOpenAIVideos } from '../providers/openai-videos/fake-openai-videos.js';
import { http, KEY_A, KEY_B, startKiln, submitBody, type Kiln } from '../../support/kiln.js';
import { useVideoKiln, videoApi } from './video-kiln.js';
import { CHROMIUM, launchChromium } from '../../support/browser.js';

const run = promisify(execFile);
const FFPROBE = process.env.FFPROBE_BIN ?? (existsSync('.tools/bin/ffprobe') ? '.tools/bin/ffprobe' : 'ffprobe');

let fake: FakeOpenAIVideos;
let kiln: Kiln;
let calls: ReturnType<typeof videoApi>;

useVideoKiln((f) => ({ kiln, fake, calls } = f));

const api = (key: string | null = KEY_A) => calls.api(key);
const create = (body: Record<string, unknown>, key = KEY_A) => calls.create(body, key);
const createOk = (body: Record<string, unknown>) => calls.createOk(body);
const finish = (id: string, timeoutMs?: number) => calls.finish(id, timeoutMs);
const sdk = () => new OpenAI({ apiKey: KEY_A, baseURL: `${kiln.baseUrl}/v1`, maxRetries: 0 });

async function probe(file: string) {
  const { stdout } = await run(FFPROBE, [
    '-v',
    'error',
    '-show_entries',
    'format=duration,format_name:stream=codec_name,width,height,pix_fmt,avg_frame_rate,nb_frames',
    '-of',
    'json',
    file,
  ]);
  return JSON.parse(stdout) as {
    format: { duration: string; format_name: string };
    streams: {
      codec_name: string;
      width: number;
      height: number;
      pix_fmt: string;
      avg_frame_rate: string;
      nb_frames: string;
    }[];
  };
}

async function saveUrl(url: string): Promise<string> {
  const { writeFile, mkdtemp } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const file = `${await mkdtemp(`${tmpdir()}/kiln-video-`)}/v.mp4`;
  const res = await fetch(url);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('video/mp4');
  await writeFile(file, Buffer.from(await res.arrayBuffer()));
  return file;
}

describe('default configuration', () => {
  it('has a local video model, a strict pro model and a workflow-node model', () => {
    const videos = DEFAULT_MODELS.filter((m): m is VideoModel => m.kind === 'video');
    expect(videos.map((m) => [m.id, m.provider, videoOptions(m).form, m.strict])).toEqual([
      ['kiln-video-1', 'local', 'video', false],
      ['kiln-video-pro', 'local', 'video', true],
      ['kiln-video-node', 'local', 'workflow-node', false],
    ]);
    const pro = videoOptions(videos[1]);
    expect([...pro.seconds]).toEqual(['10', '15', '25']);
    expect([...pro.sizes]).toEqual(['1792x1024', '1024x1792']);
  });
});

describe('official openai SDK against Kiln (local provider)', () => {
  it('create, retrieve until completed, downloadContent: a playable H.264 MP4 of the requested duration', async () => {
    const client = sdk();
    const created = await client.videos.create({
      model: 'v-local',
      prompt: 'a paper boat on a pond',
      seconds: '4',
      size: '320x180' as never,
    });
    expect(created).toMatchObject({
      object: 'video',
      model: 'v-local',
      status: 'queued',
      progress: 0,
      seconds: '4',
      size: '320x180',
      error: null,
      completed_at: null,
    });
    expect(created.id).toMatch(/^video_[a-f0-9]{32}$/);
    let v = await client.videos.retrieve(created.id);
    const seen = new Set<string>([v.status]);
    const deadline = Date.now() + 20_000;
    while (v.status !== 'completed' && v.status !== 'failed' && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      v = await client.videos.retrieve(created.id);
      seen.add(v.status);
    }
    expect(v.status, JSON.stringify(v)).toBe('completed');
    expect(seen.has('in_progress')).toBe(true);
    expect(v.progress).toBe(100);
    expect(v.completed_at).toBeGreaterThanOrEqual(v.created_at);
    const url = (v as unknown as { video_url: string }).video_url;
    expect(url).toMatch(new RegExp(`^${kiln.baseUrl}/v1/files/[a-f0-9]{32}\\.mp4$`));

    const content = await client.videos.downloadContent(created.id, { variant: 'video' });
    const bytes = Buffer.from(await content.arrayBuffer());
    const direct = Buffer.from(await (await fetch(url)).arrayBuffer());
    expect(bytes.equals(direct)).toBe(true);
    expect(bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');

    const p = await probe(await saveUrl(url));
    expect(p.streams[0]).toMatchObject({
      codec_name: 'h264',
      width: 320,
      height: 180,
      pix_fmt: 'yuv420p',
      avg_frame_rate: '8/1',
    });
    expect(Math.abs(Number(p.format.duration) - 4)).toBeLessThanOrEqual(1 / 8);
  });

  it(
    'the pro local model renders 10 s within a frame (scaled ' + 'down, aspect kept) and the file plays in Chromium',
    async () => {
      const id = await createOk({ model: 'v-local-pro', prompt: 'a pro render', seconds: '10', size: '1792x1024' });
      const v = await finish(id);
      expect(v).toMatchObject({ status: 'completed', seconds: '10', size: '1792x1024' });
      const p = await probe(await saveUrl(v.video_url));
      expect(p.streams[0]).toMatchObject({ codec_name: 'h264', width: 320, height: 182 });
      expect(Number(p.streams[0].nb_frames)).toBe(80);
      expect(Math.abs(Number(p.format.duration) - 10)).toBeLessThanOrEqual(1 / 8);

      if (!existsSync(CHROMIUM)) {
        if (process.env.KILN_SKIP_BROWSER) return;
        throw new Error(
          `Chromium not found at ${CHROMIUM}: run scripts/bootstrap.sh as root (apt-get install ` +
            `chromium), set CHROMIUM_BIN, or KILN_SKIP_BROWSER=1 to rely on ffprobe alone`,
        );
      }
      const browser = await launchChromium();
      try {
        const page = await browser.newPage();
        await page.setContent(`<video id="v" muted playsinline src="${v.video_url}"></video>`);
        const state = await page.evaluate(async () => {
          const el = document.getElementById('v') as HTMLVideoElement;
          const canPlay = el.canPlayType('video/mp4; codecs="avc1.42E01E"');
          await el.play();
          const t0 = el.currentTime;
          await new Promise((r) => setTimeout(r, 1200));
          return {
            canPlay,
            readyState: el.readyState,
            t0,
            t1: el.currentTime,
            duration: el.duration,
            width: el.videoWidth,
            error: el.error?.message ?? null,
          };
        });
        expect(state.error).toBeNull();
        expect(state.canPlay).not.toBe('');
        expect(state.readyState).toBeGreaterThanOrEqual(2);
        expect(state.t1).toBeGreaterThan(state.t0 + 0.5);
        expect(state.width).toBe(320);
        expect(Math.abs(state.duration - 10)).toBeLessThanOrEqual(1 / 8);
      } finally {
        await browser.close();
      }
    },
  );

  it(
    'the local workflow-node model answers with results[*].url; a ' +
      'record lost from Redis is answered by Temporal and repaired',
    async () => {
      const id = await createOk({ model: 'v-local-node', prompt: '' });
      const v = await finish(id);
      expect(v.status).toBe('completed');
      expect(v.results).toEqual([{ url: v.video_url, file_type: 'mp4', node_id: 'local' }]);

      // The read model shows `completed` a moment before the workflow closes: lose the record once
      // Temporal holds the result, as a real loss (long after) would find it.
      await kiln.api.client.workflow.getHandle(id).result();
      const key = kiln.api.store.taskKey(id);
      expect(await kiln.api.redis.del(key)).toBe(1);
      // The API process keeps finished views: ask as one that has not seen this task.
      kiln.api.store.finished?.clear();
      const again = await api()(`/v1/videos/${id}`);
      expect(again.json).toEqual(v);
      expect(await kiln.api.redis.exists(key)).toBe(1);
      expect((await api(KEY_B)(`/v1/videos/${id}`)).status).toBe(404);
    },
  );
});

describe('validation', () => {
  const PRO_REFUSED_SECONDS: unknown[] = [
    '4',
    '8',
    '12',
    '5',
    '9',
    '11',
    '20',
    '24',
    '26',
    '30',
    '0',
    '-10',
    '010',
    '10.0',
    '10.5',
    ' 10',
    '10 ',
    '10s',
    '',
    'ten',
    9,
    11,
    10.5,
    null,
    true,
  ];
  const PRO_REFUSED_SIZES: unknown[] = [
    '1280x720',
    '720x1280',
    '1024x1024',
    '1792x1792',
    '1024x1024',
    '1792X1024',
    '1792x1024 ',
    ' 1024x1792',
    '1792*1024',
    '1792x',
    'x1024',
    '1792x1025',
    '1791x1024',
    '',
    'landscape',
    1792,
  ];

  it.each(PRO_REFUSED_SECONDS.map((s) => [JSON.stringify(s), s]))(
    'pro model refuses seconds=%s with 400 and sends nothing upstream',
    async (_, seconds) => {
      const res = await create({ model: 'v-pro', prompt: 'p', seconds, size: '1792x1024' });
      expect(res.status, res.text).toBe(400);
      expect(res.json.error.code).toBe('invalid_request');
      expect(res.json.error.message).toMatch(/seconds/);
      expect(fake.requests).toHaveLength(0);
    },
  );

  it.each(PRO_REFUSED_SIZES.map((s) => [JSON.stringify(s), s]))(
    'pro model refuses size=%s with 400 and sends nothing upstream',
    async (_, size) => {
      const res = await create({ model: 'v-pro', prompt: 'p', seconds: '10', size });
      expect(res.status, res.text).toBe(400);
      expect(res.json.error.code).toBe('invalid_request');
      expect(res.json.error.message).toMatch(/size/);
      expect(fake.requests).toHaveLength(0);
    },
  );

  it(
    'pro model: every allowed seconds × size reaches the upstream ' +
      'exactly as given; omitted values default to 10 / 1792x1024',
    async () => {
      fake.setScript(['completed']);
      const combos = [
        ['10', '1792x1024'],
        ['15', '1792x1024'],
        ['25', '1792x1024'],
        ['10', '1024x1792'],
        ['15', '1024x1792'],
        ['25', '1024x1792'],
      ];
      const ids = [];
      for (const [seconds, size] of combos)
        ids.push(await createOk({ model: 'v-pro', prompt: `p ${seconds} ${size}`, seconds, size }));
      ids.push(await createOk({ model: 'v-pro', prompt: 'defaults' }));
      const tasks = await Promise.all(ids.map((id) => finish(id)));
      expect(tasks.map((t) => t.status)).toEqual(Array(7).fill('completed'));
      const sent = fake
        .creates()
        .map((r) => `${r.body.prompt}|${r.body.model}|${r.body.seconds}|${r.body.size}`)
        .sort();
      expect(sent).toEqual(
        [...combos.map(([s, z]) => `p ${s} ${z}|sora-2-pro|${s}|${z}`), 'defaults|sora-2-pro|10|1792x1024'].sort(),
      );
      // An integer is taken as its decimal string.
      const n = await create({ model: 'v-pro', prompt: 'n', seconds: 15, size: '1024x1792' });
      expect([n.status, n.json.seconds]).toEqual([200, '15']);
      expect((await finish(n.json.id)).status).toBe('completed');
    },
  );

  it('other models take their allowed values from configuration', async () => {
    expect((await create({ model: 'v-local', prompt: 'p', seconds: '2', size: '1280x720' })).status).toBe(200);
    for (const bad of [{ seconds: '10' }, { seconds: '3' }, { size: '1792x1024' }]) {
      const res = await create({ model: 'v-local', prompt: 'p', ...bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.json.error.code).toBe('invalid_request');
    }
  });

  it(
    'model and prompt are required; image must be an absolute ' +
      'http(s) URL; unknown or non-video models are model_not_found',
    async () => {
      const cases: [Record<string, unknown>, number, string][] = [
        [{ prompt: 'p' }, 400, 'invalid_request'],
        [{ model: 'v-oa' }, 400, 'invalid_request'],
        [{ model: 'v-oa', prompt: '   ' }, 400, 'invalid_request'],
        [{ model: 'v-oa', prompt: 7 }, 400, 'invalid_request'],
        [{ model: 'v-oa', prompt: 'x'.repeat(4001) }, 400, 'prompt_too_long'],
        [{ model: 'v-oa', prompt: 'p', image: '' }, 400, 'invalid_reference_image_url'],
        [{ model: 'v-oa', prompt: 'p', image: '/relative/cat.png' }, 400, 'invalid_reference_image_url'],
        [{ model: 'v-oa', prompt: 'p', image: 'ftp://example.com/cat.png' }, 400, 'invalid_reference_image_scheme'],
        [{ model: 'v-oa', prompt: 'p', image: 'data:image/png;base64,AAAA' }, 400, 'invalid_reference_image_scheme'],
        [
          { model: 'v-oa', prompt: 'p', nodeInfoList: [{ nodeId: '1', fieldName: 'a', fieldValue: 'b' }] },
          400,
          'invalid_request',
        ],
        [{ model: 'v-node', prompt: 'p', nodeInfoList: [{ nodeId: '1' }] }, 400, 'invalid_request'],
        [{ model: 'nope', prompt: 'p' }, 404, 'model_not_found'],
        [{ model: 'img', prompt: 'p' }, 404, 'model_not_found'],
      ];
      for (const [body, status, code] of cases) {
        const res = await create(body);
        expect([res.status, res.json?.error?.code], JSON.stringify(body).slice(0, 80)).toEqual([status, code]);
      }
      const longest = await create({ model: 'v-oa', prompt: 'x'.repeat(4000) });
      expect(longest.status).toBe(200);
      expect((await finish(longest.json.id)).status).toBe('completed');
      expect(
        (await api(null as never)('/v1/videos', { method: 'POST', json: { model: 'v-oa', prompt: 'p' } })).json.error
          .code,
      ).toBe('missing_api_key');
      const notJson = await api()('/v1/videos', {
        method: 'POST',
        body: 'model=v-oa',
        headers: { 'content-type': 'text/plain' },
      });
      expect([notJson.status, notJson.json.error.code]).toEqual([415, 'unsupported_media_type']);
      expect(fake.creates().map((r) => r.body.prompt.length)).toEqual([4000]);
    },
  );
});

describe('owner scoping and kinds kept apart', () => {
  it(
    'another owner gets not_found; image endpoints never show ' +
      'video tasks and vice versa; Retry-After while unfinished',
    async () => {
      fake.setScript(['queued']);
      const id = await createOk({ model: 'v-oa-slow', prompt: 'mine' });
      const mine = await api()(`/v1/videos/${id}`);
      expect(mine.status).toBe(200);
      expect(mine.headers.get('retry-after')).toBe(String(kiln.config.pollAfterSeconds));
      for (const path of [`/v1/videos/${id}`, `/v1/videos/${id}/content`]) {
        const other = await api(KEY_B)(path);
        expect([other.status, other.json.error.code]).toEqual([404, 'not_found']);
      }
      const early = await api()(`/v1/videos/${id}/content`);
      expect([early.status, early.json.error.code]).toEqual([409, 'task_not_ready']);

      const image = await api()('/v1beta/models/img:generateContent?output=url', {
        method: 'POST',
        json: submitBody(),
      });
      expect(image.status).toBe(202);
      expect((await api()(`/v1/tasks/${id}`)).json.error.code).toBe('not_found');
      expect((await api()(`/v1/videos/${image.json.id}`)).json.error.code).toBe('not_found');
      const batch = await api()('/v1/tasks/batch-get', { method: 'POST', json: { ids: [id, image.json.id] } });
      // The image task moves on at its own pace (the local model has no latency): only its presence is pinned.
      expect(batch.json.items.map((i: any) => i.id)).toEqual([id, image.json.id]);
      expect(batch.json.items[0].status).toBe('not_found');
      expect(['accepted', 'queued', 'running', 'succeeded']).toContain(batch.json.items[1].status);
      const list = await api()('/v1/tasks?limit=100');
      expect(list.json.items.map((i: any) => i.id)).toContain(image.json.id);
      expect(list.json.items.map((i: any) => i.id)).not.toContain(id);
      expect((await api()('/v1/videos/video_0123')).json.error.code).toBe('not_found');
      // Let its workflow end here (v-oa-slow times out) rather than call the fake during later tests.
      expect((await finish(id)).error.code).toBe('upstream_timeout');
    },
  );

  it('polls are rate limited like image tasks', async () => {
    const limited = await startKiln({
      workers: false,
      env: { RATE_LIMIT_TASK_MS: '3000' },
      models: [{ id: 'v', kind: 'video', provider: 'local' }],
    });
    try {
      const res = await http(limited.baseUrl)('/v1/videos', { method: 'POST', json: { model: 'v', prompt: 'p' } });
      expect(res.status).toBe(200);
      const first = await http(limited.baseUrl)(`/v1/videos/${res.json.id}`);
      expect([first.status, first.json.status]).toEqual([200, 'queued']);
      const second = await http(limited.baseUrl)(`/v1/videos/${res.json.id}`);
      expect([second.status, second.json.error.code]).toEqual([429, 'rate_limited']);
      expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(second.headers.get('retry-after'))).toBeLessThanOrEqual(3);
    } finally {
      await limited.stop();
    }
  });
});
