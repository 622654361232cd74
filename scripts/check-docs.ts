// Docs lint (`npm run lint`): README.md and docs/**/*.md may only point at things that exist.
//
//   - every relative Markdown link `[x](path)`, `[x](path#anchor)`, `![x](path)` and `[id]: path`
//     resolves to a file or folder of the repository; an anchor (`#anchor`, `path.md#anchor`) names a
//     heading or an `<a id>` of that Markdown file;
//   - every inline-code path (`src/…`, `test/…`, `bench/…`, `scripts/…`, `workflows/…`,
//     `activities/…`, `console/…`, `docs/…`, `bin/…`, `.ci/…`, with an optional `:line` suffix)
//     exists; a glob or placeholder (`*`, `<…>`, `{…}`, `…`) is checked up to the folder before it;
//   - nothing points outside the repository (a `../` link above its root, a `../shared` path);
//   - README.md has at most 400 lines and BENCHMARKS.md at most 250.
//
// External links (`http:`, `https:`, `mailto:`, any other scheme) and fenced code blocks are not
// checked. The core, `checkMarkdown`, is a pure function of the file's text and two predicates, so
// its tests need no files on disk.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, posix, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export interface DocProblem {
  file: string;
  line: number;
  message: string;
}

export interface CheckOptions {
  /** Does this repository-relative path (posix, no leading `./`) exist? */
  exists: (repoPath: string) => boolean;
  /** The anchors of a Markdown file (repository-relative path), or undefined to skip anchor checks for it. */
  anchorsOf?: (repoPath: string) => Set<string> | undefined;
}

/** Top-level folders whose backticked paths are checked. */
export const CODE_PATH_ROOTS = [
  'src',
  'test',
  'bench',
  'scripts',
  'workflows',
  'activities',
  'console',
  'docs',
  'bin',
  '.ci',
];
/** Build outputs (git-ignored): named in the docs, absent from a fresh clone. */
const GENERATED = ['console/dist'];

export const LINE_LIMITS: Record<string, number> = { 'README.md': 400, 'BENCHMARKS.md': 250 };

const CODE_PATH = new RegExp(`^(?:${CODE_PATH_ROOTS.map((r) => r.replace('.', '\\.')).join('|')})/`);
const SCHEME = /^[a-z][a-z0-9+.-]*:/i;

/** GitHub's anchor for a heading text: lower case, punctuation dropped, spaces to hyphens. */
export function slugOf(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .trim()
    .replace(/\s/g, '-');
}

/** Lines of a Markdown text with fenced code blocks blanked (so line numbers stay right). */
function proseLines(text: string): string[] {
  const lines = text.split('\n');
  let fence: string | null = null;
  return lines.map((line) => {
    const m = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (m && m[1][0] === fence[0] && m[1].length >= fence.length && line.trim() === m[1]) fence = null;
      return '';
    }
    if (m) {
      fence = m[1];
      return '';
    }
    return line;
  });
}

/** Every anchor a Markdown text defines: its headings (GitHub's slugs, duplicates numbered) and `<a id>`/`<a name>`. */
export function anchorsIn(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(text)) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slugOf(h[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const a of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(a[1]);
  }
  return anchors;
}

/** The part of a backticked path that must exist: no `:line` suffix, no glob or placeholder segments. */
export function codePathTarget(code: string): string | undefined {
  const token = code.trim().split(/\s+/)[0];
  if (!CODE_PATH.test(token)) return undefined;
  let path = token.replace(/(?::\d+(?:-\d+)?|#L\d+(?:-L?\d+)?)$/, '').replace(/[.,;:]$/, '');
  const wild = path.search(/[*<{[…]|\.\.\./);
  if (wild >= 0) path = path.slice(0, path.lastIndexOf('/', wild) + 1);
  return path.replace(/\/+$/, '');
}

/**
 * Problems of one Markdown file: relative links and inline-code paths that do not exist, anchors that
 * name no heading, and paths outside the repository. `file` is the file's repository-relative path.
 */
export function checkMarkdown(file: string, text: string, options: CheckOptions): DocProblem[] {
  const problems: DocProblem[] = [];
  const dir = posix.dirname(file);
  const own = anchorsIn(text);
  const report = (line: number, message: string) => problems.push({ file, line, message });

  const checkLink = (line: number, raw: string) => {
    const target = raw.replace(/^<|>$/g, '');
    if (SCHEME.test(target)) return;
    const hash = target.indexOf('#');
    const pathPart = decodeURI(hash >= 0 ? target.slice(0, hash) : target);
    const anchor = hash >= 0 ? target.slice(hash + 1) : '';
    if (!pathPart) {
      if (anchor && !own.has(anchor)) report(line, `link to #${anchor}: no such heading or anchor in ${file}`);
      return;
    }
    const resolved = pathPart.startsWith('/') ? pathPart.slice(1) : posix.normalize(posix.join(dir, pathPart));
    if (resolved === '..' || resolved.startsWith('../')) {
      report(line, `link to ${target} points outside the repository`);
      return;
    }
    const repoPath = resolved.replace(/\/+$/, '') || '.';
    if (!options.exists(repoPath)) {
      report(line, `link to ${target}: ${repoPath} does not exist`);
      return;
    }
    if (anchor && repoPath.endsWith('.md')) {
      const anchors = options.anchorsOf?.(repoPath);
      if (anchors && !anchors.has(anchor))
        report(line, `link to ${target}: no heading or anchor #${anchor} in ${repoPath}`);
    }
  };

  proseLines(text).forEach((content, i) => {
    const line = i + 1;
    if (content.includes('../shared')) report(line, 'mentions ../shared, which is outside the repository');
    // Inline code first; then blank it, so a backticked `[x](y)` is not taken for a link.
    for (const m of content.matchAll(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g)) {
      const path = codePathTarget(m[2]);
      if (path === undefined || GENERATED.some((g) => path === g || path.startsWith(`${g}/`))) continue;
      if (!options.exists(path)) report(line, `\`${m[2].trim()}\`: ${path} does not exist`);
    }
    const prose = content.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (s) => ' '.repeat(s.length));
    const def = /^\s{0,3}\[[^\]]+\]:\s*(\S+)/.exec(prose);
    if (def) checkLink(line, def[1]);
    for (const m of prose.matchAll(/\]\(\s*(<[^>]*>|[^()\s]+(?:\([^()\s]*\)[^()\s]*)*)(?:\s+["'(][^)]*)?\)/g)) {
      checkLink(line, m[1]);
    }
  });
  return problems;
}

/** Line limits: README.md at most 400 lines, BENCHMARKS.md at most 250. */
export function lineLimitProblem(file: string, text: string): DocProblem | undefined {
  const limit = LINE_LIMITS[file];
  if (limit === undefined) return undefined;
  const lines = text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
  if (lines <= limit) return undefined;
  return { file, line: limit + 1, message: `${file} has ${lines} lines; the limit is ${limit}: shorten it` };
}

function markdownFiles(root: string, dir: string): string[] {
  if (!existsSync(join(root, dir))) return [];
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = posix.join(dir, e.name);
    if (e.isDirectory()) return markdownFiles(root, rel);
    return e.name.endsWith('.md') ? [rel] : [];
  });
}

export function checkRepository(root: string): DocProblem[] {
  const exists = (p: string) => existsSync(join(root, p));
  const anchorCache = new Map<string, Set<string> | undefined>();
  const anchorsOf = (p: string) => {
    if (!anchorCache.has(p)) {
      const full = join(root, p);
      anchorCache.set(p, statSync(full).isFile() ? anchorsIn(readFileSync(full, 'utf8')) : undefined);
    }
    return anchorCache.get(p);
  };
  const files = ['README.md', ...markdownFiles(root, 'docs')];
  const problems = files.flatMap((f) => checkMarkdown(f, readFileSync(join(root, f), 'utf8'), { exists, anchorsOf }));
  for (const f of Object.keys(LINE_LIMITS)) {
    if (!exists(f)) continue;
    const p = lineLimitProblem(f, readFileSync(join(root, f), 'utf8'));
    if (p) problems.push(p);
  }
  return problems;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
  const problems = checkRepository(root);
  for (const p of problems) console.error(`${relative(process.cwd(), join(root, p.file))}:${p.line}: ${p.message}`);
  if (problems.length > 0) {
    console.error(`check-docs: ${problems.length} problem${problems.length === 1 ? '' : 's'}`);
    process.exit(1);
  }
  console.log('check-docs: README.md and docs/ point only at paths that exist');
}
