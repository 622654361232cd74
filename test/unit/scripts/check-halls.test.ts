// The halls lint (scripts/check-halls.ts) on made-up import maps, and on this repository.
import { describe, expect, it } from 'vitest';
import { checkHalls, readImports } from '../../../scripts/check-halls.js';
import { ROOT } from '../../../scripts/services.js';

const map = (entries: Record<string, string[]>) => new Map(Object.entries(entries));

describe('check-halls', () => {
  it('passes folders that import each other in one direction', () => {
    expect(
      checkHalls(
        map({
          'src/api/app.ts': ['src/tasks/service.ts', 'src/http/body.ts'],
          'src/tasks/service.ts': ['src/http/body.ts', 'src/tasks/poll.ts'],
          'src/worker/start.ts': ['activities/image/index.ts'],
          'activities/image/index.ts': ['src/tasks/store/task-store.ts'],
          'workflows/image-task.ts': ['activities/image/index.ts'],
        }),
      ),
    ).toEqual([]);
  });

  it('names a folder-level loop, with a file that makes each step of it', () => {
    const problems = checkHalls(
      map({
        'src/tasks/service.ts': ['src/keys/allowed.ts'],
        'src/keys/routes.ts': ['src/tasks/routes.ts'],
      }),
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]!.message).toContain('folder import cycle among 2 folders (src/keys, src/tasks)');
    expect(problems[0]!.message).toContain('src/tasks/service.ts imports src/keys/allowed.ts');
    expect(problems[0]!.message).toContain('src/keys/routes.ts imports src/tasks/routes.ts');
  });

  it('finds a loop through three folders, not just between two', () => {
    const problems = checkHalls(
      map({ 'src/a/x.ts': ['src/b/y.ts'], 'src/b/y.ts': ['src/c/z.ts'], 'src/c/z.ts': ['src/a/w.ts'] }),
    );
    expect(problems.map((p) => p.message.split('\n')[0])).toEqual([
      'folder import cycle among 3 folders (src/a, src/b, src/c), e.g.',
    ]);
  });

  it('refuses API-side code that imports activities/', () => {
    const problems = checkHalls(map({ 'src/chat/service.ts': ['activities/upstream-call.ts'] }));
    expect(problems).toEqual([
      {
        file: 'src/chat/service.ts',
        message: 'API-side code imports activities/upstream-call.ts; only src/worker/ may import activities/',
      },
    ]);
  });

  it('this repository has no such problem, and its imports are read (type-only ones too)', () => {
    const imports = readImports(ROOT);
    expect(imports.get('src/worker/start.ts')).toContain('activities/image/index.ts');
    expect(imports.get('src/shared/task.ts')).toContain('src/shared/channel-trail.ts');
    expect(checkHalls(imports)).toEqual([]);
  });
});
