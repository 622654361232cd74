// Seedance's request mapping (src/shared/seedance.ts) and Ark's answers in Kiln's codes
// (activities/providers/seedance/api.ts): pure functions, no server.
import { describe, expect, it } from 'vitest';
import {
  seedanceImageRefusal,
  seedanceShape,
  seedanceTask,
  seedanceVideoRefusals,
} from '../../../src/shared/seedance.js';
import { codeOf, SeedanceFailure, taskFailed } from '../../../activities/providers/seedance/api.js';

const PRO = 'doubao-seedance-1-0-pro-250528';
const ark = (code: string, message = 'm', param = '') =>
  JSON.stringify({ error: { code, message, param, type: 'BadRequest' } });

describe('seedance mapping', () => {
  it('reads a size as ratio and resolution tier by area, Ark’s own pixel sizes included', () => {
    expect(seedanceShape('1280x720')).toEqual({ ratio: '16:9', resolution: '720p' });
    expect(seedanceShape('1248x704')).toEqual({ ratio: '16:9', resolution: '720p' });
    expect(seedanceShape('720x1280')).toEqual({ ratio: '9:16', resolution: '720p' });
    expect(seedanceShape('960x960')).toEqual({ ratio: '1:1', resolution: '720p' });
    expect(seedanceShape('1440x1440')).toEqual({ ratio: '1:1', resolution: '1080p' });
    expect(seedanceShape('1920x1088')).toEqual({ ratio: '16:9', resolution: '1080p' });
    expect(seedanceShape('2176x928')).toEqual({ ratio: '21:9', resolution: '1080p' });
    expect(seedanceShape('864x480')).toEqual({ ratio: '16:9', resolution: '480p' });
    expect(seedanceShape('1120x832')).toEqual({ ratio: '4:3', resolution: '720p' });
    for (const s of ['1792x1024', '1024x1792', '640x480', '3840x2160', '12x34x5'])
      expect(seedanceShape(s)).toBeUndefined();
  });

  it('builds the body with parameters as fields, and the image as the first frame', () => {
    expect(seedanceTask({ prompt: 'p', seconds: '8', size: '1280x720', image: 'https://i/a.png' }, PRO)).toEqual({
      body: {
        model: PRO,
        content: [
          { type: 'text', text: 'p' },
          { type: 'image_url', image_url: { url: 'https://i/a.png' }, role: 'first_frame' },
        ],
        ratio: '16:9',
        resolution: '720p',
        duration: 8,
      },
    });
  });

  it('refuses what a model cannot express, naming the field and the allowed values', () => {
    expect(seedanceTask({ prompt: 'p', seconds: '13', size: '1280x720' }, PRO)).toEqual({
      refusal: { field: 'seconds', got: '13', allowed: ['whole seconds from 2 to 12'] },
    });
    expect(seedanceTask({ prompt: 'p', seconds: '5', size: '1792x1024' }, PRO)).toMatchObject({
      refusal: { field: 'size', got: '1792x1024' },
    });
    expect(
      seedanceTask(
        { prompt: 'p', seconds: '5', size: '1280x720', nodeInfoList: [{ nodeId: '1', fieldName: 'a', fieldValue: 1 }] },
        PRO,
      ),
    ).toMatchObject({
      refusal: { field: 'nodeInfoList' },
    });
    expect(seedanceImageRefusal('https://i/a.png', 'doubao-seedance-1-0-lite-t2v-250428')).toMatchObject({
      field: 'image',
      got: 'set',
    });
    expect(seedanceImageRefusal(undefined, 'doubao-seedance-1-0-lite-i2v-250428')).toMatchObject({
      field: 'image',
      got: 'none',
    });
    expect(seedanceImageRefusal(undefined, PRO)).toBeUndefined();
    expect(seedanceImageRefusal('https://i/a.png', PRO)).toBeUndefined();
  });

  it('checks a models file’s seconds per model family (2.0: 4-15, 1.5: 4-12, 1.0: 2-12, Wan 2.1: 5)', () => {
    const opts = (seconds: string[]) => ({ seconds, sizes: ['1280x720'] });
    expect(seedanceVideoRefusals(opts(['2', '12']), PRO)).toEqual([]);
    expect(seedanceVideoRefusals(opts(['15']), 'doubao-seedance-2-0-260128')).toEqual([]);
    expect(seedanceVideoRefusals(opts(['2']), 'doubao-seedance-1-5-pro-251215').map((r) => r.field)).toEqual([
      'seconds',
    ]);
    expect(seedanceVideoRefusals(opts(['10']), 'wan2-1-14b-t2v-250225')[0]!.message).toMatch(/takes 5 /);
    expect(seedanceVideoRefusals({ seconds: ['5'], sizes: ['1792x1024'] }, PRO)).toEqual([
      { field: 'sizes', message: expect.stringMatching(/size "1792x1024" cannot be sent to seedance/) },
    ]);
  });
});

describe('seedance errors', () => {
  it('maps Ark’s codes over its statuses: quota lasts, rate limits pass, moderation is a bad request', () => {
    expect(codeOf(401, 'AuthenticationError')).toBe('auth_failed');
    expect(codeOf(403, 'AccessDenied')).toBe('auth_failed');
    expect(codeOf(403, 'AccountOverdueError')).toBe('insufficient_balance');
    expect(codeOf(429, 'QuotaExceeded')).toBe('insufficient_balance');
    expect(codeOf(429, 'SetLimitExceeded')).toBe('insufficient_balance');
    expect(codeOf(429, 'RateLimitExceeded.EndpointTPMExceeded')).toBe('upstream_rate_limited');
    expect(codeOf(429, 'ModelAccountRpmRateLimitExceeded')).toBe('upstream_rate_limited');
    expect(codeOf(429, 'ServerOverloaded')).toBe('upstream_error');
    expect(codeOf(400, 'InputImageSensitiveContentDetected.PrivacyInformation')).toBe('invalid_request');
    expect(codeOf(undefined, 'OutputVideoSensitiveContentDetected')).toBe('invalid_request');
    expect(codeOf(400, 'InvalidParameter')).toBe('invalid_request');
    expect(codeOf(500, 'InternalServiceError')).toBe('upstream_error');
    expect(codeOf(404, 'ModelNotOpen')).toBe('invalid_request');
  });

  it('tells a refusal without processing from an answer that may have been processed', () => {
    const refused = (status: number, code: string) =>
      new SeedanceFailure(status, ark(code), undefined, null).info.refused;
    expect(refused(429, 'ServerOverloaded')).toBe(true);
    expect(refused(429, 'RateLimitExceeded.EndpointRPMExceeded')).toBe(true);
    expect(refused(429, 'QuotaExceeded')).toBe(true);
    expect(refused(503, 'ServiceUnavailable')).toBe(true);
    expect(refused(401, 'AuthenticationError')).toBe(true);
    expect(refused(500, 'InternalServiceError')).toBe(false);
    expect(refused(400, 'InvalidParameter')).toBe(false);
    expect(new SeedanceFailure(429, ark('ServerOverloaded'), undefined, '7').info.retryAfterMs).toBe(7000);
  });

  it('names the field of an InvalidParameter and says content policy for moderation, never echoing the key', () => {
    const f = new SeedanceFailure(400, ark('InvalidParameter', 'bad ratio for sk-secret', 'ratio'), 'sk-secret', null);
    expect(f.message).toMatch(/parameter "ratio" \(InvalidParameter\)/);
    expect(f.message).not.toContain('sk-secret');
    expect(new SeedanceFailure(400, ark('InvalidParameter.resolution'), undefined, null).message).toMatch(
      /parameter "resolution"/,
    );
    const t = taskFailed({ code: 'OutputVideoSensitiveContentDetected', message: 'may contain sensitive information' });
    expect([t.code, t.message]).toEqual([
      'invalid_request',
      expect.stringMatching(/^the upstream task failed: content policy/),
    ]);
  });
});
