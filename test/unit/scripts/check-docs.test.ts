// The docs lint (scripts/check-docs.ts): its parsing, on texts in memory and a made-up repository.
import { describe, expect, it } from 'vitest';
import { anchorsIn, checkMarkdown, codePathTarget, lineLimitProblem, slugOf } from '../../../scripts/check-docs.js';

const repo = new Set([
  'README.md',
  'docs',
  'docs/api.md',
  'docs/console.png',
  'src',
  'src/image',
  'src/image/routes.ts',
]);
const exists = (p: string) => repo.has(p);
const apiAnchors = new Set(['errors', 'idempotency-key']);
const anchorsOf = (p: string) => (p === 'docs/api.md' ? apiAnchors : undefined);
const check = (file: string, text: string) =>
  checkMarkdown(file, text, { exists, anchorsOf }).map((p) => `${p.line}: ${p.message}`);

describe('checkMarkdown', () => {
  it('passes links and code paths that exist', () => {
    const text = [
      '# Kiln',
      'See [the API](docs/api.md), [errors](docs/api.md#errors) and ![shot](docs/console.png).',
      'Routes live in `src/image/routes.ts` (`src/image/routes.ts:12`, `src/image/`, `src/*/routes.ts`).',
      'Back to [the top](#kiln).',
    ].join('\n');
    expect(check('README.md', text)).toEqual([]);
  });

  it('resolves links relative to the file that holds them', () => {
    expect(check('docs/api.md', 'See [the README](../README.md) and [shot](console.png).')).toEqual([]);
    expect(check('docs/api.md', 'See [the API](docs/api.md).')).toEqual([
      '1: link to docs/api.md: docs/docs/api.md does not exist',
    ]);
  });

  it('fails a link whose target does not exist', () => {
    expect(check('README.md', 'See [testing](docs/testing.md).')).toEqual([
      '1: link to docs/testing.md: docs/testing.md does not exist',
    ]);
  });

  it('fails an anchor that names no heading', () => {
    expect(check('README.md', '# Kiln\n[a](docs/api.md#webhooks) [b](#nowhere)')).toEqual([
      '2: link to docs/api.md#webhooks: no heading or anchor #webhooks in docs/api.md',
      '2: link to #nowhere: no such heading or anchor in README.md',
    ]);
  });

  it('fails a backticked code path that does not exist', () => {
    expect(check('README.md', 'Videos: `src/video/routes.ts:3` and `test/videos.test.ts`.')).toEqual([
      '1: `src/video/routes.ts:3`: src/video/routes.ts does not exist',
      '1: `test/videos.test.ts`: test/videos.test.ts does not exist',
    ]);
  });

  it('ignores external links, other code and fenced blocks', () => {
    const text = [
      '[spec](https://www.standardwebhooks.com/) [mail](mailto:ops@example.com) [rfc](http://example.com/x#y)',
      '`npm run dev`, `/v1/files/*`, `GET /v1/tasks/{id}`, `[x](nowhere.md)`, `console/dist`',
      '```sh',
      'cat src/missing.ts   [x](missing.md)   `src/missing.ts`',
      '```',
    ].join('\n');
    expect(check('README.md', text)).toEqual([]);
  });

  it('fails links outside the repository', () => {
    expect(check('README.md', '[x](../shared/notes.md)')).toEqual([
      '1: mentions ../shared, which is outside the repository',
      '1: link to ../shared/notes.md points outside the repository',
    ]);
  });
});

describe('helpers', () => {
  it('slugs headings as GitHub does', () => {
    expect(slugOf('Wait (long-poll)')).toBe('wait-long-poll');
    expect(slugOf('The client as a package (`@kiln/client`)')).toBe('the-client-as-a-package-kilnclient');
    expect([...anchorsIn('## A\n## A\n<a id="x"></a>\n```\n# not a heading\n```')]).toEqual(['a', 'a-1', 'x']);
  });

  it('takes the folder part of globs and placeholders', () => {
    expect(codePathTarget('test/unit/*.test.ts')).toBe('test/unit');
    expect(codePathTarget('workflows/<kind>.ts')).toBe('workflows');
    expect(codePathTarget('src/…')).toBe('src');
    expect(codePathTarget('scripts/production/stack.ts --fresh')).toBe('scripts/production/stack.ts');
    expect(codePathTarget('npm test')).toBeUndefined();
  });

  it('limits README.md to 400 lines and BENCHMARKS.md to 250', () => {
    expect(lineLimitProblem('README.md', 'x\n'.repeat(400))).toBeUndefined();
    expect(lineLimitProblem('README.md', 'x\n'.repeat(401))?.message).toMatch(
      /README.md has 401 lines; the limit is 400/,
    );
    expect(lineLimitProblem('BENCHMARKS.md', 'x\n'.repeat(251))?.message).toMatch(
      /BENCHMARKS.md has 251 lines; the limit is 250/,
    );
    expect(lineLimitProblem('docs/api.md', 'x\n'.repeat(1000))).toBeUndefined();
  });
});
