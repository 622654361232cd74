// Channels without Redis or Temporal: the models file's `channels` (inheritance, defaults, the
// checks that refuse a file naming the field), the routing order, and the verdict on a call's end
// that decides whether a task may move to another channel.
import { describe, expect, it } from 'vitest';
import { pickingOrder } from '../../../src/upstreams/channel-picker.js';
import { verdictOf } from '../../../src/upstreams/failover.js';
import { TransportFailure, UpstreamFailure } from '../../../src/upstreams/failures.js';
import { ConfigError, parseModels, type ImageModel, type VideoModel } from '../../../src/config/models.js';

const parse = (...models: unknown[]) => parseModels({ models }, 'models.json');
const refusal = (...models: unknown[]) => {
  try {
    parse(...models);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  return expect.unreachable('the models file was accepted');
};

describe('the models file', () => {
  it('a model without channels is one channel, `default`, made of its own settings', () => {
    const [m] = parse({ id: 'g', provider: 'gemini', baseUrl: 'http://g', timeoutMs: 5000, idempotent: true }) as [
      ImageModel,
    ];
    expect(m.channels).toEqual([
      expect.objectContaining({ id: 'default', provider: 'gemini', baseUrl: 'http://g', timeoutMs: 5000 }),
    ]);
    expect(m.channels[0]).toMatchObject({ idempotent: true, priority: 0, weight: 1, rateLimitRetries: 2 });
  });

  it("channels take the model's settings for what they leave out; a 429 moves on by default", () => {
    const [m] = parse({
      id: 'g',
      timeoutMs: 7000,
      credential: { env: 'K' },
      channels: [
        { id: 'a', provider: 'gemini', baseUrl: 'http://a', priority: 2 },
        { id: 'b', provider: 'gemini', baseUrl: 'http://b', timeoutMs: 9000, credential: 'none', weight: 3 },
      ],
    }) as [ImageModel];
    expect(m.provider).toBe('gemini');
    expect(m.channels.map((c) => [c.id, c.timeoutMs, c.credential, c.priority, c.weight, c.rateLimitRetries])).toEqual([
      ['a', 7000, { env: 'K' }, 2, 1, 0],
      ['b', 9000, 'none', 0, 3, 0],
    ]);
  });

  it('refuses a file whose channels cannot serve the model, naming the field', () => {
    expect(refusal({ id: 'g', channels: [{ id: 'a', provider: 'gemini' }] })).toMatch(/channels\.0\.baseUrl/);
    expect(
      refusal({
        id: 'g',
        channels: [
          { id: 'a', provider: 'local' },
          { id: 'a', provider: 'local' },
        ],
      }),
    ).toMatch(/channels\.1\.id: channel id "a" appears twice/);
    expect(refusal({ id: 'g' })).toMatch(/provider: a model needs provider/);
    expect(refusal({ id: 'g', inline: true, channels: [{ id: 'a', provider: 'local', timeoutMs: 5000 }] })).toMatch(
      /channels\.0\.timeoutMs: an inline model needs timeoutMs ≤ 1000/,
    );
    const node = { id: 'n', provider: 'workflow-node', baseUrl: 'http://n', workflowId: 'w' };
    const openai = { id: 'o', provider: 'openai-videos', baseUrl: 'http://o' };
    expect(refusal({ id: 'v', kind: 'video', channels: [openai, node] })).toMatch(
      /channels\.1\.nodes: a workflow-node channel of a video model needs nodes\.prompt/,
    );
    expect(refusal({ id: 'v', kind: 'video', form: 'workflow-node', channels: [openai, node] })).toMatch(
      /channels\.0\.provider: openai-videos cannot take nodeInfoList/,
    );
    const field = (nodeId: string, fieldName: string) => ({ nodeId, fieldName });
    const mapped = {
      ...node,
      nodes: { prompt: field('1', 't'), image: field('2', 'i'), seconds: field('3', 's'), size: field('3', 'z') },
    };
    const [v] = parse({ id: 'v', kind: 'video', channels: [openai, mapped] }) as [VideoModel];
    expect(v.channels.map((c) => c.provider)).toEqual(['openai-videos', 'workflow-node']);
  });
});

describe('routing order', () => {
  const ch = (id: string, priority: number, weight = 1) => ({
    id,
    priority,
    weight,
    timeoutMs: 1000,
    failoverOn5xx: false,
    cooldownAfter: 3,
    cooldownWindowMs: 1000,
    cooldownMs: 1000,
  });

  it('tries the highest tier first, and channels already tried only when none other is left', () => {
    const channels = [ch('low', 0), ch('high', 5), ch('mid', 2)];
    expect(pickingOrder(channels, []).map((c) => c.id)).toEqual(['high', 'mid', 'low']);
    expect(pickingOrder(channels, ['high']).map((c) => c.id)).toEqual(['mid', 'low']);
    expect(pickingOrder(channels, ['high', 'mid', 'low']).map((c) => c.id)).toEqual(['high', 'mid', 'low']);
  });

  it('shares a tier by weight', () => {
    const channels = [ch('a', 1, 3), ch('b', 1, 1)];
    let first = 0;
    for (let i = 0; i < 4000; i++) if (pickingOrder(channels, [])[0]!.id === 'a') first++;
    // 3:1 → 75 %; 4,000 draws put it within ±3 % with overwhelming probability.
    expect(first / 4000).toBeGreaterThan(0.72);
    expect(first / 4000).toBeLessThan(0.78);
  });
});

describe('the verdict on a call', () => {
  const how = { timedOut: false, canceled: false };
  const answer = (status: number, code = 'upstream_error' as const, refused = false) =>
    new UpstreamFailure(code, `upstream answered ${status}`, false, { status, refused });

  it('moves on only when the channel provably did not take the work', () => {
    const plain = { failoverOn5xx: false };
    expect(verdictOf(new TransportFailure('refused', false), plain, how)).toMatchObject({
      outcome: 'not_sent',
      movable: true,
    });
    expect(verdictOf(answer(429, 'upstream_error', true), plain, how)).toMatchObject({
      outcome: 'refused',
      movable: true,
    });
    expect(verdictOf(answer(500), plain, how)).toMatchObject({ outcome: 'failed', movable: false });
    expect(verdictOf(answer(502), { failoverOn5xx: true }, how)).toMatchObject({ outcome: 'failed', movable: true });
    expect(verdictOf(answer(400), { failoverOn5xx: true }, how)).toMatchObject({ movable: false });
    expect(verdictOf(new TransportFailure('reset', true), { failoverOn5xx: true }, how)).toMatchObject({
      outcome: 'ambiguous',
      movable: false,
    });
    expect(verdictOf(new Error('aborted'), plain, { timedOut: true, canceled: false })).toMatchObject({
      outcome: 'ambiguous',
      movable: false,
      code: 'upstream_timeout',
    });
    expect(verdictOf(new Error('aborted'), plain, { timedOut: false, canceled: true })).toMatchObject({
      outcome: 'canceled',
      movable: false,
    });
  });
});
