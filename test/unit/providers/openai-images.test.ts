// The openai-images mapping without servers: a Kiln request as the images API's fields (and the
// option refused, with what the channel takes), the size table's keys both ways, the models
// file's fields, and each error answer as a Kiln failure. Through Kiln against a fake upstream:
// test/integration/providers/openai-images/.
import { APIError } from 'openai';
import { describe, expect, it } from 'vitest';
import { failureOf, isRateLimit } from '../../../activities/providers/openai-images/answers.js';
import { ConfigError, parseModel, type ImageModel } from '../../../src/config/models.js';
import { openaiImagesFields, sizeConfig, sizeKey } from '../../../src/shared/openai-images.js';
import { refuseInexpressible } from '../../../src/image/provider-options.js';
import type { ImageRequest } from '../../../src/shared/image-task.js';

const request = (imageConfig: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): ImageRequest => ({
  contents: [{ role: 'user', parts: [{ text: 'a fox' }, { text: 'in snow' }] }],
  generationConfig: { responseModalities: ['IMAGE'], imageConfig, ...extra },
});
const gpt = parseModel({ id: 'gpt', provider: 'openai-images', baseUrl: 'https://api.openai.com' }) as ImageModel;
const channel = gpt.channels[0]!;

describe('openaiImagesFields', () => {
  it('maps the prompt, size, quality, background, output format and n', () => {
    expect(
      openaiImagesFields(
        request(
          { aspectRatio: '2:3', quality: 'medium', background: 'opaque', outputFormat: 'jpeg' },
          { candidateCount: 3 },
        ),
        channel,
      ),
    ).toEqual({
      fields: {
        prompt: 'a fox\nin snow',
        n: 3,
        size: '1024x1536',
        quality: 'medium',
        background: 'opaque',
        output_format: 'jpeg',
      },
    });
    // n 1 is the upstream's default: not sent.
    expect(openaiImagesFields(request({}, { candidateCount: 1 }), channel)).toEqual({
      fields: { prompt: 'a fox\nin snow' },
    });
  });

  it('refuses what the channel cannot send, naming the field and what it takes', () => {
    const refused = (r: ImageRequest) => {
      const out = openaiImagesFields(r, channel);
      return 'refused' in out ? out.refused : null;
    };
    expect(refused(request({ aspectRatio: '4:3' }))).toEqual({
      field: 'generationConfig.imageConfig.aspectRatio',
      got: '4:3',
      allowed: ['1:1', '3:2', '2:3'],
    });
    expect(refused(request({ quality: 'best' }))?.allowed).toContain('xhigh');
    expect(refused(request({}, { candidateCount: 0 }))?.field).toBe('generationConfig.candidateCount');
    expect(refused(request({}, { candidateCount: 2.5 }))?.field).toBe('generationConfig.candidateCount');
    expect(refused({ ...request(), systemInstruction: { parts: [{ text: 'be brief' }] } })?.field).toBe(
      'systemInstruction',
    );
    const turns = { contents: [...request().contents, { role: 'model', parts: [{ text: 'ok' }] }] };
    expect(refused(turns)?.field).toBe('contents');
  });

  it('the size table: keys read back, and each channel of a model is checked at submit', () => {
    expect([sizeKey('16:9'), sizeKey('16:9', '2K'), sizeKey(undefined, '2K'), sizeKey()]).toEqual([
      '16:9',
      '16:9@2K',
      '@2K',
      null,
    ]);
    for (const k of ['16:9', '16:9@2K', '@2K']) {
      const c = sizeConfig(k);
      expect(sizeKey(c.aspectRatio, c.imageSize)).toBe(k);
    }
    const two = parseModel({
      id: 'two',
      channels: [
        { id: 'a', provider: 'openai-images', baseUrl: 'https://a.example', sizes: { '16:9': '1792x1024' } },
        { id: 'b', provider: 'openai-images', baseUrl: 'https://b.example' },
      ],
    }) as ImageModel;
    expect(() => refuseInexpressible(request({ aspectRatio: '16:9' }), two)).toThrow(
      /aspectRatio "16:9" cannot be sent to model two \(provider openai-images\); allowed: 1:1, 3:2, 2:3/,
    );
  });

  it('the models file: paths start with /, sizes keys look like ratios, references go to edits or image', () => {
    expect(channel).toMatchObject({
      generationsPath: '/v1/images/generations',
      editsPath: '/v1/images/edits',
      referencesIn: 'edits',
      maxImages: 10,
    });
    const bad = (extra: Record<string, unknown>) => () =>
      parseModel({ id: 'x', provider: 'openai-images', baseUrl: 'https://a.example', ...extra });
    expect(bad({ generationsPath: 'v1/images' })).toThrow(ConfigError);
    expect(bad({ sizes: { square: '1024x1024' } })).toThrow(/keys look like 16:9/);
    expect(bad({ referencesIn: 'inline' })).toThrow(/referencesIn/);
  });
});

describe('failureOf', () => {
  const err = (status: number, error: Record<string, unknown>, headers: Record<string, string> = {}) =>
    APIError.generate(status, { error }, undefined, new Headers(headers));
  const seen = (e: APIError, idempotent = false) => {
    const f = failureOf(e, 'sk-key', idempotent);
    return [f.code, f.info.refused, f.retryable];
  };

  it('reads quota, rate limits, auth, content policy, fields, timeouts and server errors', () => {
    expect(seen(err(429, { code: 'insufficient_quota', message: 'quota' }))).toEqual([
      'insufficient_balance',
      true,
      false,
    ]);
    expect(seen(err(429, { code: 'QuotaExceeded' }))).toEqual(['insufficient_balance', true, false]);
    expect(seen(err(403, { code: 'AccountOverdueError' }))).toEqual(['insufficient_balance', true, false]);
    expect(seen(err(429, { code: 'rate_limit_exceeded' }))).toEqual(['upstream_rate_limited', true, false]);
    expect(seen(err(401, { code: 'invalid_api_key' }))).toEqual(['auth_failed', true, false]);
    expect(seen(err(400, { code: 'content_policy_violation' }))).toEqual(['invalid_request', false, false]);
    expect(seen(err(400, { code: 'OutputImageSensitiveContentDetected' }))).toEqual(['invalid_request', false, false]);
    expect(seen(err(400, { code: 'invalid_value', param: 'n' }))).toEqual(['invalid_request', false, false]);
    expect(seen(err(504, {}))).toEqual(['upstream_timeout', false, false]);
    expect(seen(err(503, { code: 'engine_overloaded' }))).toEqual(['upstream_error', true, false]);
    expect(seen(err(500, { type: 'server_overloaded' }))).toEqual(['upstream_error', true, false]);
    expect(seen(err(500, {}))).toEqual(['upstream_error', false, false]);
    expect(seen(err(500, {}), true)).toEqual(['upstream_error', false, true]);
    expect(isRateLimit(err(429, { code: 'rate_limit_exceeded' }))).toBe(true);
    expect(isRateLimit(err(429, { type: 'insufficient_quota' }))).toBe(false);
  });

  it("names the field, masks the key, keeps a refusal's Retry-After", () => {
    const f = failureOf(
      err(400, { code: 'invalid_value', param: 'size', message: 'bad size for sk-key' }),
      'sk-key',
      false,
    );
    expect(f.message).toBe('upstream answered 400 invalid_value, naming the field size: bad size for [redacted]');
    const limited = failureOf(err(429, { message: 'slow down' }, { 'retry-after': '7' }), undefined, false, 2);
    expect(limited.message).toBe('upstream answered 429 (after 2 retries): slow down');
    expect(limited.info.retryAfterMs).toBe(7000);
  });
});
