// A list page's bytes as the API answers them from a LIST reply: live entries only, cut after their
// head, joined with commas inside the frame, in one Buffer; an older release's pairs the same way.
import { describe, expect, it } from 'vitest';
import { BARE_FRAME, ENTRY_HEAD, joinFramed, liveEntries } from '../../../../src/tasks/store/list-items.js';
import { ITEM_SOURCE, listPage, PAGE_REPLY, pageOf } from '../../../../src/tasks/store/replies.js';

const entry = (expiry: number, item: object) =>
  Buffer.from(`3:${String(expiry).padStart(13, '0')}:${JSON.stringify(item)}`);
const frame = { head: Buffer.from('{"object":"list","days":3,"items":['), tail: Buffer.from(']}') };
const future = Date.now() + 60_000;
const past = Date.now() - 1;

describe('list page bytes', () => {
  // ioredis keeps a command's reply until the command is collected, often in a full collection only:
  // an emptied reply lets the page's items (and the socket chunks their Buffers are cut from) go at once.
  it('empties the reply once the page is made, and the page keeps its items', () => {
    const reply = [entry(future, { id: 'a' }), entry(future, { id: 'b' })];
    const page = listPage(reply, frame);
    expect(reply).toHaveLength(0);
    expect(JSON.parse(page.toString())).toEqual({ object: 'list', days: 3, items: [{ id: 'a' }, { id: 'b' }] });
    const cursorReply: (number | string)[] = [
      PAGE_REPLY.found,
      PAGE_REPLY.more,
      'v1',
      entry(future, { id: 'v1' }).toString(),
      'v0',
      entry(past, { id: 'v0' }).toString(),
    ];
    expect(pageOf(cursorReply, false)).toEqual({ ids: ['v1'], items: ['{"id":"v1"}'], hasMore: true });
    expect(cursorReply).toHaveLength(0);
  });

  it('joins the live entries, newest first, inside the frame', () => {
    const reply = [entry(future, { id: 'a' }), entry(past, { id: 'gone' }), entry(future, { id: 'b', m: 'é' })];
    const page = listPage(reply, frame);
    expect(JSON.parse(page.toString())).toEqual({ object: 'list', days: 3, items: [{ id: 'a' }, { id: 'b', m: 'é' }] });
  });

  it('answers the bare frame (items joined, nothing around) by default, and an empty page', () => {
    expect(listPage([entry(future, { id: 'a' }), entry(future, { id: 'b' })]).toString()).toBe('{"id":"a"},{"id":"b"}');
    expect(listPage([]).toString()).toBe('');
    expect(listPage([], frame).toString()).toBe('{"object":"list","days":3,"items":[]}');
    expect(listPage([entry(past, { id: 'gone' })], frame).toString()).toBe('{"object":"list","days":3,"items":[]}');
  });

  it('reads an older release’s pairs: entries, items from the task hash, and records', () => {
    const record = {
      id: 'r',
      kind: 'image',
      owner: 'o',
      model: 'm',
      status: 'queued',
      created_at: 5,
      finished_at: null,
    };
    const reply = [
      ITEM_SOURCE.entry,
      entry(future, { id: 'a' }),
      ITEM_SOURCE.entry,
      entry(past, { id: 'gone' }),
      ITEM_SOURCE.taskHash,
      Buffer.from('{"id":"h"}'),
      ITEM_SOURCE.record,
      Buffer.from(JSON.stringify(record)),
    ];
    const items = (JSON.parse(listPage(reply, frame).toString()) as { items: { id: string }[] }).items;
    expect(items.map((i) => i.id)).toEqual(['a', 'h', 'r']);
  });

  it('copies each part once, from byte `skip` on', () => {
    const live = liveEntries([entry(future, { id: 'a' }), entry(past, { id: 'x' })]);
    expect(live).toHaveLength(1);
    expect(joinFramed(live, ENTRY_HEAD, BARE_FRAME).toString()).toBe('{"id":"a"}');
    expect(joinFramed([Buffer.from('1'), Buffer.from('2')], 0, frame).toString()).toBe(
      '{"object":"list","days":3,"items":[1,2]}',
    );
  });
});
