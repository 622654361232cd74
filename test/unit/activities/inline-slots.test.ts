// Redis Cluster slots (src/infra/slots.ts): the slot of a key, hash tags, and grouping keys by the
// node that serves them, which decides what a cluster-mode read may send in one pipeline.
import { describe, expect, it } from 'vitest';
import { groupByNode, keySlot } from '../../../src/tasks/store/cluster-slots.js';

describe('keySlot', () => {
  it('is CRC16/XMODEM mod 16384, as Redis computes it', () => {
    // Values from CLUSTER KEYSLOT.
    expect(keySlot('123456789')).toBe(12739);
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('user1000')).toBe(3443);
    expect(keySlot('ä€')).toBe(14880);
    expect(keySlot('')).toBe(0);
  });

  it('hashes only the first non-empty hash tag', () => {
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('foo{bar}{zap}')).toBe(keySlot('bar'));
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
    // An empty tag: the whole key (Redis's rule).
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{')).not.toBe(keySlot(''));
  });

  it("keeps a task's record, poll limiter and missing mark in one slot, and an owner's keys in another", () => {
    const id = 'task_0123456789abcdef0123456789abcdef';
    const owner = 'f'.repeat(64);
    const slot = keySlot(`kiln:task:{${id}}`);
    expect(keySlot(`kiln:rl:task:{${id}}:${owner}`)).toBe(slot);
    expect(keySlot(`kiln:miss:{${id}}:${owner}`)).toBe(slot);
    const ownerSlot = keySlot(`kiln:owner:{${owner}}:tasks`);
    expect(keySlot(`kiln:owner:{${owner}}:tasks:items`)).toBe(ownerSlot);
    expect(keySlot(`kiln:rl:batch:{${owner}}:abc`)).toBe(ownerSlot);
  });
});

describe('groupByNode', () => {
  // Three primaries, each with a replica, as `redis-cli --cluster create` splits the slots.
  const slots: string[][] = [];
  for (let s = 0; s < 16384; s++) {
    const n = s <= 5460 ? 0 : s <= 10922 ? 1 : 2;
    slots[s] = [`10.0.0.${n}:6379`, `10.0.1.${n}:6379`];
  }
  const node = (key: string) => slots[keySlot(key)].join(';');

  it('puts each key with the keys served by the same node, in request order', () => {
    const keys = Array.from({ length: 60 }, (_, i) => `kiln:task:{task_${String(i).padStart(32, '0')}}`);
    const groups = groupByNode(slots, keys)!;
    expect(groups.size).toBe(3);
    const seen: number[] = [];
    for (const [id, idx] of groups) {
      expect(idx).toEqual([...idx].sort((a, b) => a - b));
      for (const i of idx) expect(node(keys[i])).toBe(id);
      seen.push(...idx);
    }
    expect(seen.sort((a, b) => a - b)).toEqual(keys.map((_, i) => i));
  });

  it('groups by the whole node set, so a slot moving to another primary starts a new group', () => {
    const moved = slots.map((s) => [...s]);
    const key = 'kiln:task:{a}';
    const other = Array.from({ length: 200 }, (_, i) => `k{${i}}`).find(
      (k) => node(k) === node(key) && keySlot(k) !== keySlot(key),
    )!;
    moved[keySlot(key)] = ['10.0.1.0:6379'];
    const groups = groupByNode(moved, [key, other])!;
    expect([...groups.values()]).toEqual([[0], [1]]);
  });

  it('answers null while the slot table does not cover a key (not connected yet)', () => {
    expect(groupByNode([], ['a'])).toBeNull();
    const partial = slots.slice();
    delete partial[keySlot('b')];
    expect(groupByNode(partial, ['a', 'b'])).toBeNull();
    expect(groupByNode(partial, [])).toEqual(new Map());
  });
});
