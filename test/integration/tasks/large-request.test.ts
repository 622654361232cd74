// The largest request the contract accepts (a 2 MiB body, every byte of it kept: the caller's
// tools, passed through to the upstream) runs to the end: the payload codec deflates it, so the workflow's input and the
// upstream activity's fit Temporal's 2 MiB payload limit even when the text does not compress well.
import { randomBytes } from 'node:crypto';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPRESS_FROM_BYTES } from '../../../src/temporal/codec.js';
import { startKiln, http, submitBody, waitForStatus, KEY_A, type Kiln } from '../../support/kiln.js';

const MB2 = 2 * 1024 * 1024;
const EventType = proto.temporal.api.enums.v1.EventType;

let kiln: Kiln;
beforeAll(async () => {
  kiln = await startKiln();
});
afterAll(async () => {
  await kiln?.stop();
});

/** A submit body of exactly `bytes`, filled by a tool of random base64 (kept, hardly compressible). */
function keptBody(bytes: number): Buffer {
  const mk = (text: string) => JSON.stringify(submitBody('a kiln', { tools: [{ googleSearch: { note: text } }] }));
  const fill = bytes - Buffer.byteLength(mk(''));
  const body = Buffer.from(mk(randomBytes(fill).toString('base64').slice(0, fill)));
  expect(body.length).toBe(bytes);
  return body;
}

const post = (body: Buffer) =>
  fetch(`${kiln.baseUrl}/v1beta/models/kiln-image-1:generateContent`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
    body: body as BodyInit,
  });

describe('a 2 MiB request of kept fields', () => {
  it('is accepted and succeeds; 2 MiB + 1 byte is refused with 413', async () => {
    const res = await post(keptBody(MB2));
    const accepted = (await res.json()) as { id: string };
    expect(res.status, JSON.stringify(accepted).slice(0, 300)).toBe(202);
    const api = http(kiln.baseUrl, KEY_A);
    const done = await waitForStatus(
      () => api(`/v1/tasks/${accepted.id}`),
      (s) => s !== 'accepted' && s !== 'queued' && s !== 'running',
    );
    expect(done.status).toBe('succeeded');

    // What Temporal holds: the input and the upstream call's arguments, deflated, each under the limit.
    const { events } = await kiln.api.client.workflow.getHandle(accepted.id).fetchHistory();
    const payloads = (events ?? []).flatMap((e) =>
      e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
        ? (e.workflowExecutionStartedEventAttributes?.input?.payloads ?? [])
        : e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
          ? (e.activityTaskScheduledEventAttributes?.input?.payloads ?? [])
          : [],
    );
    const large = payloads.filter((p) => (p.data?.length ?? 0) >= COMPRESS_FROM_BYTES);
    expect(large.length).toBeGreaterThanOrEqual(2);
    for (const p of large) {
      expect(Buffer.from(p.metadata?.['kiln-compression'] ?? []).toString()).toBe('deflate-raw');
      expect(p.data!.length).toBeLessThan(MB2 - 8 * 1024);
    }

    const over = await post(keptBody(MB2 + 1));
    expect(over.status).toBe(413);
    expect(((await over.json()) as { error: { code: string } }).error.code).toBe('request_too_large');
  });
});
