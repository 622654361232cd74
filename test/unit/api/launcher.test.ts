// bin/kiln-run is how production starts the API and the worker (`npm run start:api` / `start:worker`,
// the Docker image, docker-compose.yml): the memory settings BENCHMARKS.md measured live there. A probe preloaded through
// NODE_OPTIONS reports what the launched node sees, then exits before the worker would start.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../../scripts/services.js';

const LAUNCHER = join(ROOT, 'bin/kiln-run');
const probe = join(mkdtempSync(join(tmpdir(), 'kiln-launcher-')), 'probe.cjs');
writeFileSync(
  probe,
  `const fs = require('node:fs');
process.stdout.write(JSON.stringify({
  preload: process.env.LD_PRELOAD ?? null,
  mallocConf: process.env.MALLOC_CONF ?? null,
  arenaMax: process.env.MALLOC_ARENA_MAX ?? null,
  jemalloc: fs.readFileSync('/proc/self/maps', 'utf8').includes('libjemalloc'),
  execArgv: process.execArgv,
  main: process.argv[1],
}));
process.exit(0);`,
);

interface Seen {
  preload: string | null;
  mallocConf: string | null;
  arenaMax: string | null;
  jemalloc: boolean;
  execArgv: string[];
  main: string;
}

function launch(env: Record<string, string> = {}, mode = 'worker'): Seen {
  const base = { ...process.env };
  delete base.LD_PRELOAD;
  delete base.MALLOC_CONF;
  delete base.MALLOC_ARENA_MAX;
  const out = execFileSync('sh', [LAUNCHER, mode], { env: { ...base, NODE_OPTIONS: `--require ${probe}`, ...env } });
  return JSON.parse(out.toString()) as Seen;
}

/** Where the launcher looks; the bootstrap links the first. */
const JEMALLOC = [
  join(ROOT, '.tools/lib/libjemalloc.so.2'),
  '/usr/local/lib/libjemalloc.so.2',
  '/usr/lib/x86_64-linux-gnu/libjemalloc.so.2',
  '/usr/lib/aarch64-linux-gnu/libjemalloc.so.2',
  '/usr/lib64/libjemalloc.so.2',
  '/usr/lib/libjemalloc.so.2',
];

describe('bin/kiln-run', () => {
  it('runs the compiled API or worker with a 4 MiB young generation and capped allocator arenas', () => {
    for (const mode of ['api', 'worker']) {
      const seen = launch({}, mode);
      // The minified bundle (scripts/build-bundle.ts), not the compiled modules beside it.
      expect(seen.main).toBe(join(ROOT, 'dist/bundle', mode, 'main.js'));
      expect(seen.execArgv).toContain('--max-semi-space-size=4');
      // src/ops/idle-gc.ts collects through it when a busy API process goes idle.
      expect(seen.execArgv).toContain('--expose-gc');
      expect(seen.arenaMax).toBe('2');
      expect(seen.mallocConf).toBe('narenas:2,background_thread:true,dirty_decay_ms:2000,muzzy_decay_ms:0');
      // The API's old generation grows to 1.5× its live heap, not 4× (bin/kiln-run says what it saves).
      if (mode === 'api') expect(seen.execArgv).toContain('--heap-growing-percent=50');
      else expect(seen.execArgv.some((a) => a.startsWith('--heap-growing-percent'))).toBe(false);
    }
  });

  it('adds the flags of KILN_NODE_FLAGS to node (those NODE_OPTIONS refuses, like the profiler)', () => {
    const seen = launch({ KILN_NODE_FLAGS: '--stack-size=2000 --no-warnings' }, 'api');
    expect(seen.execArgv).toEqual(
      expect.arrayContaining(['--max-semi-space-size=4', '--stack-size=2000', '--no-warnings']),
    );
  });

  it('refuses anything but api or worker, saying how to call it', () => {
    const r = spawnSync('sh', [LAUNCHER, 'server']);
    expect(r.status).toBe(64);
    expect(r.stderr.toString()).toContain('usage: bin/kiln-run api|worker');
  });

  it('preloads jemalloc when the machine has it, and runs on glibc when it does not', () => {
    const installed = JEMALLOC.find((f) => existsSync(f));
    const seen = launch();
    if (installed) {
      expect(seen.preload).toBe(installed);
      expect(seen.jemalloc).toBe(true);
    } else {
      expect(seen.preload).toBeNull();
      expect(seen.jemalloc).toBe(false);
    }
  });

  it('leaves the choice to an operator who sets LD_PRELOAD or MALLOC_* (even empty)', () => {
    const seen = launch({ LD_PRELOAD: '', MALLOC_CONF: '', MALLOC_ARENA_MAX: '4' });
    expect(seen.jemalloc).toBe(false);
    expect(seen.mallocConf).toBe('');
    expect(seen.arenaMax).toBe('4');
  });

  it('is what `npm run start:api` / `start:worker`, the image and the compose file run', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['start:api']).toBe('sh bin/kiln-run api');
    expect(pkg.scripts['start:worker']).toBe('sh bin/kiln-run worker');
    const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true });
    expect(compose.services.api.command).toEqual(['sh', 'bin/kiln-run', 'api']);
    expect(compose.services.worker.command).toEqual(['sh', 'bin/kiln-run', 'worker']);
    expect(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')).toContain('CMD ["sh", "bin/kiln-run", "api"]');
  });
});
