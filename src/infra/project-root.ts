// Files that ship beside the code (workflow sources, bootstrapped tools) are found from the
// project's root, which is two levels above a source module and four above its compiled copy in
// dist/server: the nearest ancestor holding Kiln's package.json, whichever way this runs.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (let dir = here; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'kiln') {
      return dir;
    }
    if (dirname(dir) === dir) return join(here, '..', '..');
  }
}

export const PROJECT_ROOT = findRoot();
