// An image model whose provider answers later (a job: here fal's queue, through its fake) is
// reachable from the image surfaces beyond generateContent and OpenAI Images (which the provider's
// own tests cover): Gemini Batch through the unmodified @google/genai SDK, and the `kiln` CLI. Each
// image the caller sees is Kiln's copy, and each request is one submit at the upstream.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GoogleGenAI, JobState, type BatchJob } from '@google/genai';
import { startFakeFal, type FakeFal } from '../providers/fal/fake-fal.js';
import { KEY_A, startKiln, type Kiln } from '../../support/kiln.js';

const SECRET = 'fal-key-id:fal-SECRET-surfaces-77';
let fake: FakeFal;
let kiln: Kiln;

beforeAll(async () => {
  fake = await startFakeFal();
  kiln = await startKiln({
    env: { FAL_KEY: SECRET, POLL_AFTER_SECONDS: '1' },
    models: [
      {
        id: 'flux',
        provider: 'fal',
        baseUrl: fake.baseUrl,
        upstreamModel: 'fal-ai/flux/dev',
        credential: { env: 'FAL_KEY' },
        pollIntervalMs: 200,
        heartbeatTimeoutMs: 1000,
      },
    ],
  });
});
afterAll(async () => {
  await kiln?.stop();
  await fake?.close();
});
beforeEach(() => {
  fake.reset();
  fake.key = SECRET;
});

describe('a job image model on every surface', () => {
  it('Gemini Batch: each inline request is a fal job; the answers carry the images inline', async () => {
    const sdk = new GoogleGenAI({
      apiKey: KEY_A,
      httpOptions: { baseUrl: kiln.baseUrl, retryOptions: { attempts: 1 } },
    });
    const ask = (text: string) => ({
      contents: [{ role: 'user', parts: [{ text }] }],
      config: { responseModalities: ['IMAGE'] },
    });
    const created = await sdk.batches.create({ model: 'flux', src: [ask('a heron'), ask('a kingfisher')] });
    let job: BatchJob = created;
    for (const deadline = Date.now() + 60_000; ;) {
      job = await sdk.batches.get({ name: created.name! });
      if (job.state === JobState.JOB_STATE_SUCCEEDED || job.state === JobState.JOB_STATE_FAILED) break;
      expect(Date.now(), `batch still ${job.state}`).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(job.state).toBe(JobState.JOB_STATE_SUCCEEDED);
    const answers = job.dest!.inlinedResponses!;
    expect(answers).toHaveLength(2);
    // Gemini's batch form: the image bytes inline (read from Kiln's copy, the upstream's link expires).
    for (const a of answers) {
      const part = a.response!.candidates![0]!.content!.parts![0]!;
      expect(part.inlineData?.mimeType).toBe('image/png');
      expect(Buffer.from(part.inlineData!.data!, 'base64').subarray(1, 4).toString()).toBe('PNG');
    }
    expect(
      fake
        .submits()
        .map((r) => (r.body as { prompt?: string }).prompt)
        .sort(),
    ).toEqual(['a heron', 'a kingfisher']);
  });

  it('the kiln CLI: `kiln image --model flux` waits for the job and saves the PNG', async () => {
    const out = mkdtempSync(join(tmpdir(), 'kiln-job-cli-'));
    const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        ['bin/kiln.js', 'image', 'an otter', '--model', 'flux', '--aspect', '1:1', '--out', out, '--json'],
        {
          env: { ...process.env, KILN_BASE_URL: kiln.baseUrl, KILN_API_KEY: KEY_A, KILN_POLL_INTERVAL: '0.2' },
          timeout: 60_000,
        },
        (err, stdout, stderr) => resolve({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
      ),
    );
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout) as { task: { status: string; id: string }; files: string[] };
    expect(result.task.status).toBe('succeeded');
    expect(readFileSync(result.files[0]!).subarray(1, 4).toString()).toBe('PNG');
    expect(fake.submits()).toHaveLength(1);
  });
});
