import { describe, it, expect } from 'vitest';
import { Jimp } from 'jimp';
import { imageDimensions, renderFresh, renderPromptPng } from '../../../activities/providers/local/render-png.js';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe('imageDimensions', () => {
  it.each([
    [undefined, undefined, 1024, 1024],
    ['1:1', '1K', 1024, 1024],
    ['16:9', '1K', 1024, 576],
    ['9:16', '2K', 1152, 2048],
    ['4:3', '2k', 2048, 1536],
    ['3:4', '4K', 3072, 4096],
    ['21:9', '4K', 4096, 1755],
    ['2:3', undefined, 683, 1024],
    ['1:100000', '1K', 1, 1024],
  ])('%s @ %s -> %ix%i', (ratio, size, width, height) => {
    expect(imageDimensions(ratio, size)).toEqual({ width, height });
  });

  it.each(['', '16x9', '16:', ':9', '0:1', '1:0', '-1:1', '1.5:1', ' 1:1', '1:1:1', '99999999999999999999:1'])(
    'rejects aspect ratio %j',
    (ratio) => {
      expect(() => imageDimensions(ratio, '1K')).toThrow(/aspectRatio/);
    },
  );

  it.each(['', '3K', '1024', 'K', '1KB'])('rejects image size %j', (size) => {
    expect(() => imageDimensions('1:1', size)).toThrow(/imageSize/);
  });
});

describe('renderPromptPng', () => {
  it.each([
    [undefined, undefined, 1024, 1024],
    ['16:9', '1K', 1024, 576],
    ['9:16', '2K', 1152, 2048],
    ['1:1', '4K', 4096, 4096],
  ])(
    'renders a decodable PNG for %s @ %s',
    async (aspectRatio, imageSize, width, height) => {
      const png = await renderPromptPng({ prompt: 'a red fox in the snow', aspectRatio, imageSize });
      expect(png.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
      const decoded = await Jimp.read(png);
      expect(decoded.width).toBe(width);
      expect(decoded.height).toBe(height);
    },
    30_000,
  );

  it('is deterministic for the same input and differs by prompt and seed', async () => {
    const a = await renderFresh({ prompt: 'a red fox in the snow' });
    const a2 = await renderFresh({ prompt: 'a red fox in the snow' });
    const b = await renderPromptPng({ prompt: 'a blue whale at sea' });
    const c = await renderPromptPng({ prompt: 'a red fox in the snow', seed: 42 });
    expect(a.equals(a2)).toBe(true);
    expect(a.equals(b)).toBe(false);
    expect(a.equals(c)).toBe(false);
  });

  it('keeps a render: the same options get the same bytes without rendering again, other options do not', async () => {
    const opts = { prompt: 'kept render', aspectRatio: '4:1' };
    const first = await renderPromptPng(opts);
    expect(await renderPromptPng({ ...opts })).toBe(first); // the kept Buffer itself
    expect(first.equals(await renderFresh(opts))).toBe(true);
    const others = await Promise.all([
      renderPromptPng({ ...opts, seed: 1 }),
      renderPromptPng({ ...opts, aspectRatio: '1:4' }),
      renderPromptPng({ ...opts, imageSize: '2K' }),
      renderPromptPng({ ...opts, prompt: 'kept render!' }),
    ]);
    for (const o of others) expect(o.equals(first)).toBe(false);
  });

  it('renders a 4000-char prompt, with and without spaces', async () => {
    const words = 'lorem ipsum dolor sit amet '.repeat(200).slice(0, 4000);
    for (const prompt of [words, 'x'.repeat(4000)]) {
      const png = await renderPromptPng({ prompt, aspectRatio: '16:9' });
      const decoded = await Jimp.read(png);
      expect([decoded.width, decoded.height]).toEqual([1024, 576]);
    }
  }, 30_000);

  it('copes with characters the font lacks, blank prompts and extreme ratios', async () => {
    for (const opts of [
      { prompt: '日本の庭園 🌸\n\twith\r\nnewlines' },
      { prompt: '   ' },
      { prompt: 'tiny', aspectRatio: '1:1000' },
    ]) {
      const decoded = await Jimp.read(await renderPromptPng(opts));
      expect(decoded.width * decoded.height).toBeGreaterThan(0);
    }
  });

  it('rejects malformed options', async () => {
    await expect(renderPromptPng({ prompt: 'x', aspectRatio: '16/9' })).rejects.toThrow(/aspectRatio/);
    await expect(renderPromptPng({ prompt: 'x', imageSize: '8K' })).rejects.toThrow(/imageSize/);
  });
});
