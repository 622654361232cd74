// readFromTemporal's Redis side: which ids are asked of Temporal, and what each batch costs Redis
// before that. Temporal is an in-memory stand-in here that records the visibility queries it is
// asked (test/integration covers the real server's answers).
import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { readFromTemporal } from '../../../src/tasks/fallback.js';

function fakes(missing: string[], tombstones: string[]) {
  const calls = { recentlyMissing: [] as string[][], deletedAmong: [] as string[][], queries: [] as string[] };
  const store = {
    recentlyMissing: async (_owner: string, ids: string[]) => {
      calls.recentlyMissing.push(ids);
      return new Set(ids.filter((id) => missing.includes(id)));
    },
    deletedAmong: async (ids: string[]) => {
      calls.deletedAmong.push(ids);
      return new Set(ids.filter((id) => tombstones.includes(id)));
    },
    rememberMissing: async () => {},
    transition: async () => true,
    get: async () => null,
    dispatchedTo: async () => null,
    withExpiry: <R>(r: R) => r,
  };
  const temporal = {
    workflow: {
      // eslint-disable-next-line require-yield
      list: async function* ({ query }: { query: string }) {
        calls.queries.push(query);
      },
    },
  } as unknown as Client;
  const kind = { workflowType: 'imageTaskWorkflow', record: () => null as never };
  return { calls, deps: { temporal, store: store as never }, kind };
}

describe('readFromTemporal before Temporal', () => {
  it('answers ids Temporal did not know a moment ago with one lookup: no tombstone check, no query', async () => {
    const { calls, deps, kind } = fakes(['a', 'b', 'c'], []);
    expect((await readFromTemporal(deps, kind, 'owner', ['a', 'b', 'c'])).size).toBe(0);
    expect(calls.recentlyMissing).toEqual([['a', 'b', 'c']]);
    expect(calls.deletedAmong).toEqual([]);
    expect(calls.queries).toEqual([]);
  });

  it('checks tombstones of the other ids only, and asks Temporal for those neither missing nor deleted', async () => {
    const { calls, deps, kind } = fakes(['a'], ['b']);
    await readFromTemporal(deps, kind, 'owner', ['a', 'b', 'c', 'd']);
    expect(calls.deletedAmong).toEqual([['b', 'c', 'd']]);
    expect(calls.queries).toHaveLength(1);
    expect(calls.queries[0]).toContain(`WorkflowId IN ('c', 'd')`);
  });

  it('asks nothing when every other id is deleted', async () => {
    const { calls, deps, kind } = fakes(['a'], ['b', 'c']);
    await readFromTemporal(deps, kind, 'owner', ['a', 'b', 'c']);
    expect(calls.deletedAmong).toEqual([['b', 'c']]);
    expect(calls.queries).toEqual([]);
  });
});
