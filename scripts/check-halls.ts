// Halls lint (`npm run lint`): how the product's folders may import each other.
//
//   - API-side code never imports `activities/`: only the worker's own folder (`src/worker/`)
//     builds activities. What both sides use lives in folders both import (src/upstreams, …).
//   - No folder-level import cycle: with every import counted (type-only ones too, since they tie
//     folders together all the same), the graph of folders is acyclic.
//
// Each folder is a node of its own (src/tasks and src/tasks/store are two). The core,
// `checkHalls`, is a pure function of a file → imported files map, so its tests need no files.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

/** The product's roots; tests, benchmarks and scripts may import anything. */
export const PRODUCT_ROOTS = ['src', 'activities', 'workflows', 'console/src'];
/**
 * The folders that may import activities/: the worker's wiring, activities themselves, and workflows
 * (as types only, for proxyActivities; ESLint's workflow rule keeps those imports type-only).
 */
export const ACTIVITY_IMPORTERS = ['src/worker', 'activities', 'workflows'];

export interface HallProblem {
  file?: string;
  message: string;
}

const under = (path: string, folder: string) => path === folder || path.startsWith(`${folder}/`);

/** `imports`: repository-relative posix file → the repository-relative files it imports. */
export function checkHalls(imports: ReadonlyMap<string, readonly string[]>): HallProblem[] {
  const problems: HallProblem[] = [];
  const edges = new Map<string, Set<string>>();
  for (const [file, targets] of imports) {
    const from = posix.dirname(file);
    for (const target of targets) {
      if (under(target, 'activities') && !ACTIVITY_IMPORTERS.some((f) => under(file, f)))
        problems.push({ file, message: `API-side code imports ${target}; only src/worker/ may import activities/` });
      const to = posix.dirname(target);
      if (to === from) continue;
      if (!edges.has(from)) edges.set(from, new Set());
      edges.get(from)!.add(to);
    }
  }
  for (const { folders, cycle } of folderCycles(edges)) {
    const proof = cycle.map((f, i) => {
      const to = cycle[(i + 1) % cycle.length]!;
      return `${f} -> ${to}: ${witness(imports, f, to)}`;
    });
    problems.push({
      message:
        `folder import cycle among ${folders.length} folders (${folders.join(', ')}), e.g.\n    ` +
        proof.join('\n    '),
    });
  }
  return problems;
}

/** A file of `from` that imports a file of `to`, for the message. */
function witness(imports: ReadonlyMap<string, readonly string[]>, from: string, to: string): string {
  for (const [file, targets] of imports) {
    if (posix.dirname(file) !== from) continue;
    const t = targets.find((x) => posix.dirname(x) === to);
    if (t) return `${file} imports ${t}`;
  }
  return '?';
}

/** Each strongly connected component of more than one folder (Tarjan), with one shortest cycle in it. */
export function folderCycles(
  edges: ReadonlyMap<string, ReadonlySet<string>>,
): { folders: string[]; cycle: string[] }[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      for (let w = ''; w !== v;) {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      }
      if (component.length > 1) components.push(component);
    }
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);
  return components.map((c) => ({ folders: c.sort(), cycle: shortestCycle(edges, new Set(c)) }));
}

function shortestCycle(edges: ReadonlyMap<string, ReadonlySet<string>>, component: Set<string>): string[] {
  const start = [...component].sort()[0]!;
  const prev = new Map<string, string>();
  const queue = [start];
  while (queue.length) {
    const v = queue.shift()!;
    for (const w of edges.get(v) ?? []) {
      if (!component.has(w)) continue;
      if (w === start) {
        const path = [v];
        while (path[0] !== start) path.unshift(prev.get(path[0]!)!);
        return path;
      }
      if (!prev.has(w)) {
        prev.set(w, v);
        queue.push(w);
      }
    }
  }
  return [start];
}

/** Every import of the product's files, resolved to repository files (packages left out). */
export function readImports(root: string): Map<string, string[]> {
  const files = PRODUCT_ROOTS.flatMap((r) => walk(join(root, r)));
  const known = new Set(files.map((f) => relative(root, f).split('\\').join('/')));
  const out = new Map<string, string[]>();
  for (const abs of files) {
    const file = relative(root, abs).split('\\').join('/');
    const info = ts.preProcessFile(readFileSync(abs, 'utf8'), true, true);
    const targets = info.importedFiles
      .map((i) => i.fileName)
      .filter((s) => s.startsWith('.'))
      .map((s) => resolveSpecifier(known, file, s))
      .filter((t): t is string => t !== undefined);
    out.set(file, targets);
  }
  return out;
}

function resolveSpecifier(known: Set<string>, file: string, spec: string): string | undefined {
  const base = posix.normalize(posix.join(posix.dirname(file), spec));
  const stem = base.replace(/\.(js|jsx|mjs)$/, '');
  return [base, `${stem}.ts`, `${stem}.tsx`, `${stem}.mts`, `${base}/index.ts`].find((c) => known.has(c));
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' ? [] : walk(p);
    return /\.(ts|tsx|mts)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const problems = checkHalls(readImports(root));
  for (const p of problems) console.error(`${p.file ? `${p.file}: ` : ''}${p.message}`);
  if (problems.length) {
    console.error(`check-halls: ${problems.length} problem(s); see docs/architecture.md ("Folders").`);
    process.exit(1);
  }
}
