// How Kiln's video requests read as MiniMax create bodies (src/shared/minimax.ts) and how MiniMax's
// base_resp codes read in Kiln's (activities/providers/minimax/api.ts).
import { describe, expect, it } from 'vitest';
import { codeOf, MinimaxFailure } from '../../../activities/providers/minimax/api.js';
import { minimaxShape, minimaxVideoBody, minimaxVideoRefusals } from '../../../src/shared/minimax.js';
import type { VideoRequest } from '../../../src/shared/video-task.js';

const req = (extra: Partial<VideoRequest> = {}): VideoRequest => ({
  prompt: 'a fox',
  seconds: '6',
  size: '1366x768',
  ...extra,
});

describe('minimax mapping', () => {
  it('size: 16:9 by the shorter side (512P, 720P, 768P, 1080P), either orientation; others none', () => {
    expect(minimaxShape('1280x720')).toEqual({ tier: '720P', portrait: false });
    expect(minimaxShape('768x1366')).toEqual({ tier: '768P', portrait: true });
    expect(minimaxShape('1920x1080')).toEqual({ tier: '1080P', portrait: false });
    expect(minimaxShape('912x512')).toEqual({ tier: '512P', portrait: false });
    for (const s of ['1024x768', '1792x1024', '1080x1080', '1280*720', '640x360'])
      expect(minimaxShape(s)).toBeUndefined();
  });

  it('the create body: model, prompt, duration, resolution, and first_frame_image only with an image', () => {
    expect(minimaxVideoBody(req({ seconds: '10' }), 'MiniMax-Hailuo-2.3')).toEqual({
      body: { model: 'MiniMax-Hailuo-2.3', prompt: 'a fox', duration: 10, resolution: '768P' },
    });
    expect(minimaxVideoBody(req({ size: '1080x1920', image: 'https://i/a.png' }), 'minimax-hailuo-02')).toEqual({
      body: {
        model: 'minimax-hailuo-02',
        prompt: 'a fox',
        duration: 6,
        resolution: '1080P',
        first_frame_image: 'https://i/a.png',
      },
    });
    expect(minimaxVideoBody(req({ size: '1280x720' }), 'T2V-01')).toMatchObject({ body: { resolution: '720P' } });
  });

  it('refuses what the model cannot render for this request, naming the field', () => {
    const refused = (r: Partial<VideoRequest>, model: string) =>
      (
        minimaxVideoBody(req(r), model, ['1366x768', '768x1366']) as {
          refusal?: { field: string; allowed: readonly string[] };
        }
      ).refusal;
    expect(refused({ image: 'https://i/a.png', size: '1280x720' }, 'T2V-01')).toMatchObject({ field: 'image' });
    expect(refused({}, 'MiniMax-Hailuo-2.3-Fast')).toMatchObject({ field: 'image' });
    expect(refused({}, 'I2V-01-live')).toMatchObject({ field: 'image' });
    expect(refused({ size: '768x1366' }, 'MiniMax-Hailuo-2.3')).toMatchObject({
      field: 'size',
      allowed: ['1366x768', expect.stringMatching(/portrait size only with an image/)],
    });
    expect(refused({ size: '1920x1080', seconds: '10' }, 'MiniMax-Hailuo-2.3')).toMatchObject({
      field: 'seconds',
      allowed: ['6 (at 1080P)'],
    });
    expect(refused({ size: '912x512' }, 'MiniMax-Hailuo-02')).toMatchObject({ field: 'size' });
    expect(refused({ size: '912x512' }, 'MiniMax-Hailuo-2.3')).toMatchObject({ field: 'size' });
    expect(
      refused({ nodeInfoList: [{ nodeId: '1', fieldName: 'x', fieldValue: 1 }] }, 'MiniMax-Hailuo-2.3'),
    ).toMatchObject({ field: 'nodeInfoList' });
    expect(refused({}, 'S2V-01')).toMatchObject({ field: 'model' });
  });

  it('an unknown model (a newer one) takes every tier and 6 or 10 s: MiniMax checks the rest', () => {
    expect(minimaxVideoBody(req({ size: '1280x720', seconds: '10' }), 'MiniMax-Hailuo-9')).toMatchObject({
      body: { resolution: '720P', duration: 10 },
    });
    expect(minimaxVideoRefusals({ seconds: ['6', '10'], sizes: ['1280x720', '720x1280'] }, 'MiniMax-Hailuo-9')).toEqual(
      [],
    );
  });

  it('start-up refusals: seconds no tier renders, sizes without a tier, portrait for text-to-video, S2V', () => {
    expect(
      minimaxVideoRefusals({ seconds: ['6', '10'], sizes: ['1366x768', '1920x1080'] }, 'MiniMax-Hailuo-2.3'),
    ).toEqual([]);
    const fields = (o: { seconds: string[]; sizes: string[] }, m: string) =>
      minimaxVideoRefusals(o, m).map((r) => r.field);
    expect(fields({ seconds: ['5', '6'], sizes: ['1366x768'] }, 'MiniMax-Hailuo-2.3')).toEqual(['seconds']);
    expect(fields({ seconds: ['6'], sizes: ['720x1280', '1280x720'] }, 'T2V-01')).toEqual(['sizes']);
    expect(fields({ seconds: ['10'], sizes: ['1366x768', '1920x1080'] }, 'MiniMax-Hailuo-2.3')).toEqual(['sizes']);
    expect(fields({ seconds: ['6'], sizes: ['768x1366'] }, 'I2V-01')).toEqual(['sizes']);
    expect(fields({ seconds: ['6'], sizes: ['1280x720'] }, 'I2V-01')).toEqual([]);
    expect(fields({ seconds: ['6'], sizes: ['1366x768'] }, 'S2V-01')).toEqual(['upstreamModel']);
  });
});

describe('minimax status codes', () => {
  it('base_resp codes map to Kiln codes; the HTTP status decides otherwise', () => {
    expect([1004, 2049, 1008, 1002, 1039, 1026, 1027, 2013, 1001, 1000, 1033].map((c) => codeOf(c))).toEqual([
      'auth_failed',
      'auth_failed',
      'insufficient_balance',
      'upstream_rate_limited',
      'upstream_rate_limited',
      'invalid_request',
      'invalid_request',
      'invalid_request',
      'upstream_timeout',
      'upstream_error',
      'upstream_error',
    ]);
    expect(codeOf(9999, 401)).toBe('auth_failed');
    expect(codeOf(9999)).toBe('upstream_error');
  });

  it('refused before any work: the key, the balance and rate limits; passing faults are transient', () => {
    const f = (http: number, code?: number) => new MinimaxFailure(http, code, 'msg', undefined, null);
    expect([1004, 2049, 1008, 1002].map((c) => f(200, c).info.refused)).toEqual([true, true, true, true]);
    expect([1026, 2013, 1000, 1033].map((c) => f(200, c).info.refused)).toEqual([false, false, false, false]);
    expect(f(503).info).toMatchObject({ refused: true, status: 503 });
    expect(f(200, 1002).info.status).toBeUndefined();
    expect([1002, 1000, 1024, 1001].map((c) => f(200, c).transient)).toEqual([true, true, true, true]);
    expect([1004, 1026, 2013].map((c) => f(200, c).transient)).toEqual([false, false, false]);
    expect(f(502).transient).toBe(true);
  });

  it('a key the upstream echoes is masked', () => {
    const e = new MinimaxFailure(200, 1004, 'key sk-secret not valid', 'sk-secret', null);
    expect(e.message).toBe('upstream answered 200 status_code 1004: key [redacted] not valid');
  });
});
