// How Kiln's requests read as DashScope tasks (src/shared/dashscope.ts) and how DashScope's error
// codes read in Kiln's (activities/providers/dashscope/api.ts).
import { describe, expect, it } from 'vitest';
import { codeOf, DashScopeFailure } from '../../../activities/providers/dashscope/api.js';
import { dashscopeImageTask, dashscopeVideoTask, wanSize } from '../../../src/shared/dashscope.js';
import type { ImageRequest } from '../../../src/shared/image-task.js';

const req = (imageConfig?: Record<string, unknown>, extra: Record<string, unknown> = {}): ImageRequest => ({
  contents: [{ role: 'user', parts: [{ text: 'a fox' }] }],
  generationConfig: { ...(imageConfig ? { imageConfig } : {}), ...extra },
});

describe('dashscope image mapping', () => {
  it('Qwen-Image: each aspect ratio its one size; no size when none is asked', () => {
    expect(dashscopeImageTask(req({ aspectRatio: '16:9' }), 'qwen-image-plus')).toEqual({
      task: {
        path: 'text2image/image-synthesis',
        body: { model: 'qwen-image-plus', input: { prompt: 'a fox' }, parameters: { size: '1664*928' } },
      },
    });
    expect(dashscopeImageTask(req(), 'qwen-image')).toMatchObject({ task: { body: { parameters: {} } } });
    expect(dashscopeImageTask(req({ aspectRatio: '2:3' }), 'qwen-image')).toMatchObject({
      refusal: { field: 'imageConfig.aspectRatio', got: '2:3' },
    });
    expect(dashscopeImageTask(req({ imageSize: '2K' }), 'qwen-image')).toMatchObject({
      refusal: { field: 'imageConfig.imageSize' },
    });
  });

  it('Wan: W*H within the tier’s area, multiples of 16, ratio within 1:4 to 4:1; n up to 4', () => {
    expect(wanSize(1, 1024 * 1024)).toBe('1024*1024');
    expect(wanSize(16 / 9, 1440 * 1440)).toBe('1920*1072');
    const r = dashscopeImageTask(
      req({ aspectRatio: '9:16', imageSize: '1K' }, { candidateCount: 4, seed: 7 }),
      'wan2.2-t2i-flash',
    );
    expect(r).toMatchObject({ task: { body: { parameters: { size: '768*1360', n: 4, seed: 7 } } } });
    expect(dashscopeImageTask(req({ aspectRatio: '9:1' }), 'wan2.2-t2i-flash')).toMatchObject({
      refusal: { field: 'imageConfig.aspectRatio' },
    });
    expect(dashscopeImageTask(req(undefined, { candidateCount: 5 }), 'wan2.2-t2i-flash')).toMatchObject({
      refusal: { field: 'generationConfig.candidateCount', allowed: ['1', '2', '3', '4'] },
    });
    expect(dashscopeImageTask(req({ imageSize: '4K' }), 'wan2.2-t2i-flash')).toMatchObject({
      refusal: { field: 'imageConfig.imageSize', allowed: ['1K', '2K'] },
    });
  });

  it('refuses what has no DashScope field: other generationConfig keys, tools, a system instruction, model turns', () => {
    expect(dashscopeImageTask(req(undefined, { topP: 0.5 }), 'wan2.2-t2i-flash')).toMatchObject({
      refusal: { field: 'generationConfig.topP' },
    });
    expect(dashscopeImageTask({ ...req(), systemInstruction: { parts: [{ text: 's' }] } }, 'qwen-image')).toMatchObject(
      {
        refusal: { field: 'systemInstruction' },
      },
    );
    const turns = {
      contents: [
        { role: 'user', parts: [{ text: 'a' }] },
        { role: 'model', parts: [{ text: 'b' }] },
      ],
    };
    expect(dashscopeImageTask(turns, 'qwen-image')).toMatchObject({
      refusal: { field: 'contents.role', got: 'model' },
    });
  });
});

describe('dashscope video mapping', () => {
  it('t2v: size as W*H and seconds as duration; i2v: img_url and the resolution tier', () => {
    expect(dashscopeVideoTask({ prompt: 'p', seconds: '5', size: '832x480' }, 'wan2.2-t2v-plus')).toMatchObject({
      task: { path: 'video-generation/video-synthesis', body: { parameters: { size: '832*480', duration: 5 } } },
    });
    const i2v = { prompt: 'p', seconds: '10', size: '720x1280', image: 'https://x/a.png' };
    expect(dashscopeVideoTask(i2v, 'wan2.5-i2v-preview')).toMatchObject({
      task: { body: { input: { img_url: 'https://x/a.png' }, parameters: { resolution: '720P', duration: 10 } } },
    });
    expect(dashscopeVideoTask({ ...i2v, size: '1792x1024' }, 'wan2.5-i2v-preview')).toMatchObject({
      refusal: { field: 'size' },
    });
  });
});

describe('dashscope error codes', () => {
  it('the code wins over the HTTP status', () => {
    expect(codeOf(401, 'InvalidApiKey', '')).toBe('auth_failed');
    expect(codeOf(400, 'Arrearage', '')).toBe('insufficient_balance');
    expect(codeOf(403, 'AccessDenied.Unpurchased', '')).toBe('insufficient_balance');
    expect(codeOf(429, 'Throttling.AllocationQuota', '')).toBe('insufficient_balance');
    expect(codeOf(429, 'Throttling.RateQuota', '')).toBe('upstream_rate_limited');
    expect(codeOf(400, 'DataInspectionFailed', '')).toBe('invalid_request');
    expect(codeOf(400, 'InvalidParameter', '')).toBe('invalid_request');
    expect(codeOf(500, 'InternalError.Timeout', '')).toBe('upstream_timeout');
    expect(codeOf(503, 'ServiceUnavailable', '')).toBe('upstream_error');
    expect(codeOf(undefined, 'SomethingNew', '')).toBe('upstream_error');
  });

  it('refusals before any work: key, balance, throttling, a busy service; a bad parameter or a 500 is not one', () => {
    const refused = (status: number, code: string, message = 'm') =>
      new DashScopeFailure(status, JSON.stringify({ code, message, request_id: 'r' }), undefined, null).info.refused;
    expect(refused(401, 'InvalidApiKey')).toBe(true);
    expect(refused(400, 'Arrearage')).toBe(true);
    expect(refused(429, 'Throttling')).toBe(true);
    expect(refused(503, 'ServiceUnavailable')).toBe(true);
    expect(refused(500, 'InternalError', 'system is busy, please try again later')).toBe(true);
    expect(refused(400, 'InvalidParameter')).toBe(false);
    expect(refused(500, 'InternalError')).toBe(false);
    const masked = new DashScopeFailure(
      400,
      JSON.stringify({ code: 'InvalidParameter', message: 'key sk-1 bad' }),
      'sk-1',
      null,
    );
    expect(masked.message).toBe('upstream answered 400 InvalidParameter: key [redacted] bad');
  });
});
