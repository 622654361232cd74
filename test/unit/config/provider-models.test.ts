// The models file at start: provider names, each provider's required fields, and image models whose
// channels answer later (jobs) are refused with a message naming the field.
import { describe, expect, it } from 'vitest';
import { ConfigError, parseModel, parseModels } from '../../../src/config/models.js';
import { IMAGE_PROVIDERS, imageRunsJobs, VIDEO_PROVIDERS } from '../../../src/config/providers.js';
import { imageProviders, videoProviders } from '../../../src/worker/providers.js';
import type { BlobStore } from '../../../src/blobs/local.js';

const refusal = (raw: unknown) => {
  try {
    parseModel(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  return expect.unreachable('the model was accepted');
};

describe('provider names and required fields', () => {
  it('an unknown provider is refused, naming the field and the known names', () => {
    const m = refusal({ id: 'x', provider: 'midjourney', baseUrl: 'https://up.example' });
    expect(m).toMatch(/^provider: /);
    expect(m).toContain('openai-images');
    expect(() => parseModels({ models: [{ id: 'x', provider: 'nope' }] }, 'models.json')).toThrow(
      /models\.json: models\.0\.provider/,
    );
  });

  it('a job provider without upstreamModel is refused, naming it; with it the model runs jobs', () => {
    for (const provider of ['fal', 'replicate', 'dashscope']) {
      expect(refusal({ id: 'x', provider, baseUrl: 'https://up.example' })).toContain(
        `upstreamModel: ${provider} needs upstreamModel`,
      );
      expect(imageRunsJobs(provider)).toBe(true);
    }
    expect(imageRunsJobs('gemini')).toBe(false);
    expect(imageRunsJobs('openai-images')).toBe(false);
  });

  it('an image model cannot mix channels that answer later with channels that answer within the call', () => {
    const m = refusal({
      id: 'mixed',
      channels: [
        { id: 'a', provider: 'gemini', baseUrl: 'https://g.example' },
        { id: 'b', provider: 'fal', baseUrl: 'https://queue.fal.run', upstreamModel: 'fal-ai/flux/dev' },
      ],
    });
    expect(m).toMatch(/^channels: channels whose upstream answers later \(fal\)/);
  });

  it('a job model whose budget allows more checks than a history holds is refused, naming pollIntervalMs', () => {
    const base = { id: 'j', provider: 'fal', baseUrl: 'https://queue.fal.run', upstreamModel: 'fal-ai/flux/dev' };
    expect(refusal({ ...base, pollIntervalMs: 50, overallTimeoutMs: 250_001 })).toMatch(
      /^pollIntervalMs: .*5001 checks/,
    );
    expect(parseModel({ ...base, pollIntervalMs: 50, overallTimeoutMs: 250_000 }).id).toBe('j');
  });

  it("every provider name the models file takes is in the worker's registry", async () => {
    const deps = { blobs: {} as BlobStore, keys: {}, env: {} };
    expect(Object.keys(await imageProviders(deps)).sort()).toEqual([...IMAGE_PROVIDERS].sort());
    expect(Object.keys(await videoProviders(deps)).sort()).toEqual([...VIDEO_PROVIDERS].sort());
  });

  it('a worker builds only the providers its models name, each once', async () => {
    const deps = { blobs: {} as BlobStore, keys: {}, env: {} };
    expect(Object.keys(await imageProviders(deps, ['fal', 'local', 'fal']))).toEqual(['fal', 'local']);
    expect(Object.keys(await videoProviders(deps, []))).toEqual([]);
  });
});
