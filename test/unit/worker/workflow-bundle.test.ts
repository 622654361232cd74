import { existsSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Script } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { bundleInChild, leanBundle } from '../../../src/worker/workflow-bundle.js';

const inlineMap = (map: object) =>
  `//# sourceMappingURL=data:application/json;charset=utf-8;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
const mapOf = (code: string) => {
  const b64 = code.slice(code.indexOf('base64,', code.lastIndexOf('//# sourceMappingURL=')) + 7);
  return JSON.parse(Buffer.from(b64.trimEnd(), 'base64').toString()) as Record<string, unknown>;
};
const isLatin1 = (s: string) => !/[\u0100-\uffff]/.test(s);

describe('leanBundle', () => {
  const map = { version: 3, sources: ['a.ts'], names: [], mappings: 'AAAA;AACA', sourcesContent: ['// a → b\n'] };
  const body = '// queued → running\nglobalThis.out = ["a → b", `…`, /^→$/.test("→")];\n';

  it('drops the sources from the source map and keeps its mappings', () => {
    const lean = mapOf(leanBundle(body + inlineMap(map)));
    expect(lean.sourcesContent).toBeUndefined();
    expect(lean).toEqual({ version: 3, sources: ['a.ts'], names: [], mappings: 'AAAA;AACA' });
  });

  it('writes characters past Latin-1 as escapes that mean the same', () => {
    const code = leanBundle(body + inlineMap(map));
    expect(isLatin1(code)).toBe(true);
    const run = (src: string) => {
      const ctx = { globalThis: {} as { out?: unknown } };
      new Script(src).runInNewContext(ctx);
      return ctx.globalThis.out;
    };
    expect(run(code)).toEqual(run(body));
    expect(run(code)).toEqual(['a → b', '…', true]);
  });

  it('escapes from U+0100 on and leaves Latin-1 as it is', () => {
    const code = leanBundle(`// \u00e9 \u00ff \u0100\n${inlineMap(map)}`);
    expect(code.startsWith('// \u00e9 \u00ff \\u0100\n')).toBe(true);
  });

  it('refuses a bundle without an inline source map', () => {
    expect(() => leanBundle(body)).toThrow(/no inline source map/);
    expect(() => leanBundle(`${body}//# sourceMappingURL=bundle.js.map\n`)).toThrow(/no inline source map/);
  });
});

describe('bundleInChild', () => {
  it('writes the lean bundle to a file that remove() takes away', { timeout: 60_000 }, async () => {
    // The child runs workflow-bundle.ts itself, which needs tsx's loader as under `npm run`.
    const nodeOptions = process.env.NODE_OPTIONS;
    process.env.NODE_OPTIONS = `${nodeOptions ?? ''} --import tsx`;
    const file = await bundleInChild().finally(() => {
      if (nodeOptions === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = nodeOptions;
    });
    try {
      const code = readFileSync(file.codePath, 'utf8');
      expect(code).toContain('imageTaskWorkflow');
      expect(isLatin1(code)).toBe(true);
      const map = mapOf(code);
      expect(map.sourcesContent).toBeUndefined();
      expect((map.sources as string[]).some((s) => s.endsWith('workflows/image-task.ts'))).toBe(true);
    } finally {
      file.remove();
    }
    expect(existsSync(dirname(file.codePath))).toBe(false);
  });
});
