// The fal provider's pure parts: Kiln's image and video options as fal's inputs, what is refused,
// and fal's error answers in Kiln's codes.
import { describe, expect, it } from 'vitest';
import { falImageRefusal, falImageSize, falVideoRefusals, falVideoShape } from '../../../src/shared/fal.js';
import { falImageInput, imageOutputs } from '../../../activities/providers/fal/image.js';
import { falVideoInput } from '../../../activities/providers/fal/video.js';
import { FalHttpFailure } from '../../../activities/providers/fal/queue.js';
import type { ImageRequest } from '../../../src/shared/image-task.js';

const req = (extra: Partial<ImageRequest> = {}, parts: ImageRequest['contents'][0]['parts'] = []): ImageRequest => ({
  contents: [{ role: 'user', parts: [{ text: 'a fox' }, ...parts] }],
  ...extra,
});

describe('fal image input', () => {
  it('image_size: a preset for its ratio at 1K, else width and height in 16-pixel steps', () => {
    expect(falImageSize()).toBeUndefined();
    expect(falImageSize('16:9')).toBe('landscape_16_9');
    expect(falImageSize('3:4', '1K')).toBe('portrait_4_3');
    expect(falImageSize('1:1', '2K')).toEqual({ width: 2048, height: 2048 });
    expect(falImageSize('3:2')).toEqual({ width: 1024, height: 688 });
    expect(falImageSize('9:16', '4K')).toEqual({ width: 2304, height: 4096 });
    expect(falImageSize(undefined, '2K')).toEqual({ width: 2048, height: 2048 });
  });

  it('the request as an input: prompt, image_size, num_images, seed, image_url (URL or data URI)', () => {
    const url = req({ generationConfig: { imageConfig: { aspectRatio: '4:3' }, candidateCount: 3, seed: 9 } }, [
      { inlineData: { mimeType: 'image/png', data: 'https://x.test/a.png' } },
    ]);
    expect(falImageInput(url)).toEqual({
      prompt: 'a fox',
      image_size: 'landscape_4_3',
      num_images: 3,
      seed: 9,
      image_url: 'https://x.test/a.png',
    });
    const bytes = req({}, [{ inlineData: { mimeType: 'image/jpeg', data: 'AAAA' } }]);
    expect(falImageInput(bytes)).toEqual({ prompt: 'a fox', image_url: 'data:image/jpeg;base64,AAAA' });
  });

  it('refuses what fal cannot express, naming the field', () => {
    expect(falImageRefusal(req({ generationConfig: { responseModalities: ['IMAGE'], imageConfig: {} } }))).toBeNull();
    const two = req({}, [
      { inlineData: { data: 'https://x.test/a.png' } },
      { inlineData: { data: 'https://x.test/b.png' } },
    ]);
    expect(falImageRefusal(two)?.field).toBe('reference images');
    expect(falImageRefusal(req({ generationConfig: { temperature: 1 } }))?.field).toBe('generationConfig.temperature');
    expect(falImageRefusal(req({ generationConfig: { candidateCount: 0 } }))?.field).toBe(
      'generationConfig.candidateCount',
    );
    expect(falImageRefusal(req({ generationConfig: { seed: 1.5 } }))?.field).toBe('generationConfig.seed');
    expect(falImageRefusal(req({ generationConfig: { imageConfig: { imageSize: 'big' } } }))?.field).toBe(
      'generationConfig.imageConfig.imageSize',
    );
    expect(falImageRefusal(req({ systemInstruction: { parts: [{ text: 's' }] } }))?.field).toBe('systemInstruction');
  });

  it('outputs: flagged images dropped; all flagged is the content policy', () => {
    const img = (n: number) => ({ url: `https://v3.fal.media/${n}.png`, content_type: 'image/png' });
    expect(imageOutputs({ images: [img(0), img(1)], has_nsfw_concepts: [true, false] })).toEqual([
      { url: 'https://v3.fal.media/1.png', fileType: 'png' },
    ]);
    expect(() => imageOutputs({ images: [img(0)], has_nsfw_concepts: [true] })).toThrow(/content policy/);
    expect(() => imageOutputs({ images: [{ url: 'file:///etc/passwd' }] })).toThrow(/http\(s\) url/);
  });
});

describe('fal video input', () => {
  it('size as aspect_ratio and resolution; seconds as duration', () => {
    expect(falVideoShape('1280x720')).toEqual({ aspect_ratio: '16:9', resolution: '720p' });
    expect(falVideoShape('1080x1920')).toEqual({ aspect_ratio: '9:16', resolution: '1080p' });
    expect(falVideoShape('854x480')).toEqual({ aspect_ratio: '16:9', resolution: '480p' });
    expect(falVideoShape('1792x1024')).toBeUndefined();
    expect(falVideoRefusals({ sizes: ['1280x720', '1000x1000'] }).map((r) => r.field)).toEqual(['sizes']);
    expect(falVideoInput({ prompt: 'p', seconds: '5', size: '720x720', image: 'https://x.test/i.png' })).toEqual({
      prompt: 'p',
      duration: '5',
      aspect_ratio: '1:1',
      resolution: '720p',
      image_url: 'https://x.test/i.png',
    });
  });
});

describe('fal errors', () => {
  const failure = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new FalHttpFailure(status, JSON.stringify(body), 'k3y', new Headers(headers));

  it('maps status and body to codes; refusals and transient faults as Kiln routes them', () => {
    expect(failure(401, { detail: 'No user found' }).code).toBe('auth_failed');
    const balance = failure(403, { detail: 'User is locked. Reason: Exhausted balance. Top up …' });
    expect([balance.code, balance.info.refused]).toEqual(['insufficient_balance', true]);
    const limited = failure(429, { detail: 'Rate limit' }, { 'retry-after': '3' });
    expect([limited.code, limited.info.refused, limited.info.retryAfterMs, limited.transient]).toEqual([
      'upstream_rate_limited',
      true,
      3000,
      true,
    ]);
    const busy = failure(503, { detail: 'No runner', error_type: 'runner_scheduling_failure' });
    expect([busy.code, busy.info.refused]).toEqual(['upstream_error', true]);
    expect(failure(504, { detail: 'Request timed out', error_type: 'request_timeout' }).code).toBe('upstream_timeout');
    const field = failure(422, { detail: [{ loc: ['body', 'image_size', 'width'], msg: 'too big', type: 'x' }] });
    expect([field.code, field.message]).toEqual(['invalid_request', 'fal answered 422: image_size.width: too big']);
    const policy = failure(422, [{ loc: ['body', 'prompt'], msg: 'flagged', type: 'content_policy_violation' }]);
    expect(policy.message).toBe('fal answered 422: content policy: prompt: flagged');
    expect(failure(400, { detail: 'bad key k3y' }).message).toBe('fal answered 400: bad key [redacted]');
  });
});
