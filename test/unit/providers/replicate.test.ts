// The replicate provider's pure parts: the request mapped into `input`, what is refused, the create
// route for each model reference, the models-file checks, and how answers read.
import { describe, expect, it } from 'vitest';
import { imageInput, imageInputRefusal, videoInput, videoInputRefusal } from '../../../src/shared/replicate-input.js';
import {
  createRoute,
  outputsOf,
  predictionFailed,
  progressOf,
  ReplicateHttpFailure,
} from '../../../activities/providers/replicate/predictions.js';
import { ConfigError, parseModels } from '../../../src/config/models.js';
import type { ImageRequest } from '../../../src/shared/image-task.js';

const req = (extra: Partial<ImageRequest> = {}, refs: string[] = []): ImageRequest => ({
  contents: [
    {
      role: 'user',
      parts: [{ text: 'a fox' }, ...refs.map((data) => ({ inlineData: { mimeType: 'image/png', data } }))],
    },
  ],
  ...extra,
});
const VERSION = '5c7d5dc6dd8bf75c1acaa8565735e7986bc5b66206b55cca93cb72c9bf15ccaa';

describe('replicate input mapping', () => {
  it('image: defaults, renames, lists, and what is not sent', () => {
    const r = req({ generationConfig: { candidateCount: 2, seed: 3, imageConfig: { aspectRatio: '16:9' } } });
    expect(imageInput(r, undefined, { go_fast: true }, [])).toEqual({
      go_fast: true,
      prompt: 'a fox',
      aspect_ratio: '16:9',
      num_outputs: 2,
      seed: 3,
    });
    expect(
      imageInput(req({}, ['u1', 'u2']), { image: 'image_input', imageList: true }, undefined, ['u1', 'u2']),
    ).toEqual({
      prompt: 'a fox',
      image_input: ['u1', 'u2'],
    });
    expect(imageInput(req({ generationConfig: { candidateCount: 1 } }), undefined, undefined, [])).toEqual({
      prompt: 'a fox',
    });
  });

  it('image: refuses what the channel cannot send, naming the field', () => {
    expect(imageInputRefusal(req())).toBeNull();
    expect(imageInputRefusal(req({ generationConfig: { responseModalities: ['IMAGE'] } }))).toBeNull();
    expect(imageInputRefusal(req({}, ['https://x/a.png']))?.field).toBe('reference images');
    expect(imageInputRefusal(req({}, ['a', 'b']), { image: 'input_image' })?.allowed[0]).toMatch(/at most 1/);
    expect(imageInputRefusal(req({}, ['a', 'b']), { image: 'image_input', imageList: true })).toBeNull();
    expect(imageInputRefusal(req({ generationConfig: { topP: 0.4 } }))?.field).toBe('generationConfig.topP');
    expect(imageInputRefusal(req({ generationConfig: { imageConfig: { imageSize: '2K' } } }))?.field).toBe('imageSize');
    expect(
      imageInputRefusal(req({ generationConfig: { imageConfig: { imageSize: '2K' } } }), { imageSize: 'size' }),
    ).toBeNull();
    expect(
      imageInputRefusal(req({ generationConfig: { imageConfig: { aspectRatio: '1:1' } } }), { aspectRatio: null })
        ?.field,
    ).toBe('aspectRatio');
    expect(imageInputRefusal(req({ generationConfig: { candidateCount: 3 } }), { count: null })?.field).toBe(
      'candidateCount',
    );
    expect(imageInputRefusal(req({ generationConfig: { candidateCount: 9 } }))?.allowed).toEqual([
      'a whole number from 1 to 8',
    ]);
    expect(imageInputRefusal(req({ tools: [{}] }))?.field).toBe('tools');
    expect(imageInputRefusal(req({ systemInstruction: { parts: [{ text: 's' }] } }))?.field).toBe('systemInstruction');
  });

  it('video: seconds as duration, size as aspect ratio and resolution; renamed and unsent inputs', () => {
    const v = { prompt: 'p', seconds: '5', size: '1920x1080', image: 'https://x/i.png' };
    expect(videoInput(v, undefined, undefined, v.image)).toEqual({
      prompt: 'p',
      image: 'https://x/i.png',
      duration: 5,
      aspect_ratio: '16:9',
      resolution: '1080p',
    });
    expect(
      videoInput({ ...v, size: '720x1280' }, { image: 'start_image', resolution: null }, { fps: 24 }, v.image),
    ).toEqual({
      fps: 24,
      prompt: 'p',
      start_image: 'https://x/i.png',
      duration: 5,
      aspect_ratio: '9:16',
    });
    expect(videoInputRefusal(v, { image: null })?.field).toBe('image');
    expect(videoInputRefusal({ ...v, nodeInfoList: [{ nodeId: '1', fieldName: 'x', fieldValue: 1 }] })?.field).toBe(
      'nodeInfoList',
    );
    expect(videoInputRefusal(v)).toBeNull();
  });
});

describe('replicate predictions API', () => {
  it('creates by model for owner/name, by version otherwise', () => {
    expect(createRoute('black-forest-labs/flux-schnell')).toEqual({
      path: '/models/black-forest-labs/flux-schnell/predictions',
    });
    expect(createRoute(`replicate/hello-world:${VERSION}`)).toEqual({ path: '/predictions', version: VERSION });
    expect(createRoute(VERSION)).toEqual({ path: '/predictions', version: VERSION });
    expect(() => createRoute('../../admin')).toThrow(/not a Replicate model/);
  });

  it('the models file refuses a malformed upstreamModel and imageSizes a channel cannot send', () => {
    const m = (extra: Record<string, unknown>) => ({
      id: 'r',
      provider: 'replicate',
      baseUrl: 'https://api.replicate.com',
      upstreamModel: 'owner/name',
      imageSizes: [],
      ...extra,
    });
    expect(() => parseModels({ models: [m({ upstreamModel: 'owner/name:v1' })] }, 'f')).toThrow(
      /upstreamModel: replicate takes/,
    );
    expect(() => parseModels({ models: [m({ imageSizes: undefined })] }, 'f')).toThrow(ConfigError);
    expect(() => parseModels({ models: [m({ imageSizes: undefined })] }, 'f')).toThrow(
      /imageSizes: .*inputNames\.imageSize/,
    );
    expect(() => parseModels({ models: [m({ inputNames: { prompt: 'text', bogus: 'x' } })] }, 'f')).toThrow(
      /inputNames/,
    );
    expect(
      parseModels({ models: [m({ imageSizes: ['1K'], inputNames: { imageSize: 'resolution' } })] }, 'f'),
    ).toHaveLength(1);
  });

  it('outputs: a URL, a list, or an object of them; progress from the last tqdm bar', () => {
    expect(outputsOf('https://r.delivery/a.mp4')).toEqual([{ url: 'https://r.delivery/a.mp4' }]);
    expect(outputsOf(['https://r/a.png', 'https://r/b.png']).map((o) => o.url)).toEqual([
      'https://r/a.png',
      'https://r/b.png',
    ]);
    expect(outputsOf({ video: 'https://r/v.mp4', seed: 3 })).toEqual([{ url: 'https://r/v.mp4' }]);
    expect(() => outputsOf('hello Alice')).toThrow(/without an output file/);
    expect(progressOf('Using seed: 1\n 20%|██        | 2/10 [00:01<00:04]\n 70%|███████   | 7/10 [00:03<00:01]')).toBe(
      70,
    );
    expect(progressOf('Using seed: 1')).toBeUndefined();
    expect(progressOf(null)).toBeUndefined();
  });

  it('problem details: codes, refusals, Retry-After (header or body), the invalid field named', () => {
    const f422 = new ReplicateHttpFailure(
      422,
      JSON.stringify({
        title: 'Input validation failed',
        status: 422,
        invalid_fields: [{ type: 'enum', field: 'input.aspect_ratio', description: 'must be one of 1:1, 16:9' }],
      }),
      undefined,
      null,
    );
    expect([f422.code, f422.info.refused, f422.message]).toEqual([
      'invalid_request',
      false,
      'upstream answered 422: Input validation failed: input.aspect_ratio: must be one of 1:1, 16:9',
    ]);
    const f429 = new ReplicateHttpFailure(
      429,
      JSON.stringify({ detail: 'throttled', status: 429, retry_after: 5 }),
      undefined,
      null,
    );
    expect([f429.code, f429.info.refused, f429.info.retryAfterMs, f429.transient]).toEqual([
      'upstream_rate_limited',
      true,
      5000,
      true,
    ]);
    expect(new ReplicateHttpFailure(429, '{}', undefined, '2').info.retryAfterMs).toBe(2000);
    const f402 = new ReplicateHttpFailure(
      402,
      JSON.stringify({ title: 'Insufficient credit', detail: 'top up', status: 402 }),
      undefined,
      null,
    );
    expect([f402.code, f402.info.refused]).toEqual(['insufficient_balance', true]);
    expect(new ReplicateHttpFailure(503, '<html>busy</html>', undefined, null).info.refused).toBe(true);
    expect(
      new ReplicateHttpFailure(401, JSON.stringify({ detail: 'bad token r8_SECRET' }), 'r8_SECRET', null).message,
    ).toBe('upstream answered 401: bad token [redacted]');
  });

  it('failed predictions: a safety filter is the request (invalid_request), anything else upstream_error', () => {
    expect(predictionFailed({ error: 'NSFW content detected. Try again.' }).code).toBe('invalid_request');
    expect(predictionFailed({ error: 'flagged as sensitive (E005)' }).code).toBe('invalid_request');
    expect(predictionFailed({ error: 'CUDA out of memory' }).code).toBe('upstream_error');
    expect(predictionFailed({ error: null }).message).toMatch(/no error given/);
  });
});
