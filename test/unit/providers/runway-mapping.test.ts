// How Kiln's video requests read as Runway calls (src/shared/runway.ts) and how Runway's answers read
// in Kiln's codes (activities/providers/runway/api.ts).
import { describe, expect, it } from 'vitest';
import { RunwayFailure, taskFailed } from '../../../activities/providers/runway/api.js';
import { runwayDefaultSeconds, runwayRatio, runwayVideoRefusals, runwayVideoTask } from '../../../src/shared/runway.js';
import type { VideoRequest } from '../../../src/shared/video-task.js';

const req = (extra: Partial<VideoRequest> = {}): VideoRequest => ({
  prompt: 'a fox',
  seconds: '5',
  size: '1280x720',
  ...extra,
});

describe('runway request mapping', () => {
  it('size as ratio, seconds as duration; the image picks image_to_video', () => {
    expect(runwayRatio('1280x720')).toBe('1280:720');
    expect(runwayRatio('16:9')).toBeUndefined();
    expect(runwayVideoTask(req(), 'gen4.5')).toEqual({
      task: { path: 'text_to_video', body: { model: 'gen4.5', promptText: 'a fox', ratio: '1280:720', duration: 5 } },
    });
    expect(runwayVideoTask(req({ image: 'https://x.example/a.png', size: '960x960' }), 'gen4_turbo')).toEqual({
      task: {
        path: 'image_to_video',
        body: {
          model: 'gen4_turbo',
          promptText: 'a fox',
          ratio: '960:960',
          duration: 5,
          promptImage: 'https://x.example/a.png',
        },
      },
    });
  });

  it('refuses, naming the field, what a known model cannot take', () => {
    expect(runwayVideoTask(req(), 'gen4_turbo')).toMatchObject({ refusal: { field: 'image', got: 'none' } });
    expect(runwayVideoTask(req({ image: 'http://x.example/a.png' }), 'gen4.5')).toMatchObject({
      refusal: { field: 'image' },
    });
    expect(runwayVideoTask(req({ size: '960x960' }), 'gen4.5')).toMatchObject({
      refusal: { field: 'size', got: '960x960' },
    });
    expect(runwayVideoTask(req({ seconds: '5' }), 'veo3.1')).toMatchObject({
      refusal: { field: 'seconds', allowed: ['4', '6', '8'] },
    });
    expect(runwayVideoTask(req({ prompt: 'é'.repeat(1001) }), 'gen4.5')).toMatchObject({
      refusal: { field: 'prompt' },
    });
    expect(
      runwayVideoTask(req({ nodeInfoList: [{ nodeId: '1', fieldName: 'a', fieldValue: 1 }] }), 'gen4.5'),
    ).toMatchObject({ refusal: { field: 'nodeInfoList' } });
  });

  it('sends a model it does not know as asked: ratio W:H and whole-second duration', () => {
    expect(runwayVideoTask(req({ size: '1920x1080', seconds: '12' }), 'gen9_future')).toMatchObject({
      task: { path: 'text_to_video', body: { ratio: '1920:1080', duration: 12 } },
    });
    expect(runwayVideoRefusals({ seconds: ['12'], sizes: ['1920x1080'], form: 'video' }, 'gen9_future')).toEqual([]);
  });

  it('start-up: sizes neither call takes, durations the model has not, the workflow-node form', () => {
    const r = runwayVideoRefusals(
      { seconds: ['5', '12'], sizes: ['1280x720', '1920x1080'], form: 'workflow-node' },
      'gen4_turbo',
    );
    expect(r.map((x) => x.field)).toEqual(['form', 'sizes', 'seconds']);
    expect(runwayDefaultSeconds('veo3.1')).toEqual(['8', '6', '4']);
    expect(runwayDefaultSeconds('gen4_turbo')).toEqual(['5', '10']);
    expect(runwayDefaultSeconds(undefined)).toEqual(['5', '10']);
  });
});

describe('runway answers in Kiln codes', () => {
  const failure = (status: number, body: unknown, retryAfter: string | null = null) =>
    new RunwayFailure(status, body, 'key_secret', retryAfter);

  it('HTTP answers: code, whether refused before any work, Retry-After, the field a 400 names', () => {
    const cases: [number, unknown, string, boolean][] = [
      [
        400,
        { error: 'Validation of body failed', issues: [{ path: ['ratio'], message: 'Invalid enum value' }] },
        'invalid_request',
        false,
      ],
      [400, { error: 'You do not have enough credits to run this task.' }, 'insufficient_balance', true],
      [401, { error: 'Invalid API key' }, 'auth_failed', true],
      [429, { error: 'You have exceeded the rate limit for this endpoint.' }, 'upstream_rate_limited', true],
      [502, { error: 'Bad gateway' }, 'upstream_error', true],
      [503, { error: 'Service unavailable' }, 'upstream_error', true],
      [504, { error: 'Gateway timeout' }, 'upstream_timeout', false],
      [500, undefined, 'upstream_error', false],
    ];
    for (const [status, body, code, refused] of cases) {
      const f = failure(status, body);
      expect([status, f.code, f.info.refused]).toEqual([status, code, refused]);
    }
    expect(
      failure(400, { error: 'x', issues: [{ path: ['promptImage'], message: 'Only HTTPS URLs are allowed.' }] })
        .message,
    ).toBe('upstream answered 400: promptImage: Only HTTPS URLs are allowed.');
    expect(failure(429, { error: 'slow down' }, '3').info.retryAfterMs).toBe(3000);
    expect(failure(401, { error: 'bad key key_secret' }).message).not.toContain('key_secret');
    expect(failure(503, {}).transient).toBe(true);
    expect(failure(400, {}).transient).toBe(false);
  });

  it('failureCode: moderation and inputs are the caller’s (invalid_request), INTERNAL.* the upstream’s', () => {
    expect(taskFailed('SAFETY.INPUT.IMAGE', 'flagged')).toMatchObject({ code: 'invalid_request' });
    expect(taskFailed('SAFETY.INPUT.IMAGE', 'flagged').message).toMatch(/^content policy/);
    expect(taskFailed('INPUT_PREPROCESSING.SAFETY.TEXT', 'flagged').message).toMatch(/^content policy/);
    expect(taskFailed('ASSET.INVALID', 'bad image')).toMatchObject({ code: 'invalid_request' });
    expect(taskFailed('INTERNAL.BAD_OUTPUT.CODE01', 'bad output')).toMatchObject({ code: 'upstream_error' });
    expect(taskFailed(undefined, undefined)).toMatchObject({ code: 'upstream_error' });
  });
});
