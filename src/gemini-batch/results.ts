// A finished batch's inline responses, in request order: each succeeded task's candidates with its
// images as base64 inlineData (read back from the blob store, as the direct form does), each other
// request's google.rpc.Status. Read only once the batch is done: polls of a running batch read no
// image.
import type { Candidate, Part } from '../shared/image-task.js';
import type { Blobs } from '../blobs/stores.js';
import { UnusableUrl, type SafeFetch } from '../infra/safe-fetch.js';
import { rpcStatus } from '../http/google-errors.js';
import type { BatchRecord } from './store.js';
import { failureOf, type InlinedResponse, type TaskNow } from './view.js';
import { withDeadline } from '../shared/deadline.js';

/** Images read at once while a batch's results are built. */
const READS_AT_ONCE = 8;

export interface ImageSource {
  blobs: Blobs;
  /** For result images an upstream returned as URLs outside the blob store. */
  fetchImage: SafeFetch;
}

/** Runs `fn` over `items` with at most `width` calls under way, keeping the order of the answers. */
export async function inPool<T, R>(
  items: readonly T[],
  width: number,
  fn: (t: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}

async function readImage(src: ImageSource, url: string): Promise<{ data: Buffer; mimeType: string }> {
  const stored = await src.blobs.read(url);
  if (stored) return stored;
  const got = await withDeadline(30_000, (signal) => src.fetchImage(url, signal));
  return { data: got.data, mimeType: got.mediaType };
}

async function inlineCandidate(src: ImageSource, c: Candidate): Promise<Candidate> {
  const parts: Part[] = [];
  for (const p of c.content.parts) {
    if (!p.inlineData) {
      parts.push(p);
      continue;
    }
    const img = await readImage(src, p.inlineData.data);
    parts.push({ inlineData: { mimeType: p.inlineData.mimeType ?? img.mimeType, data: img.data.toString('base64') } });
  }
  return { ...c, content: { role: c.content.role ?? 'model', parts } };
}

export async function inlinedResponses(
  src: ImageSource,
  rec: BatchRecord,
  tasks: TaskNow[],
): Promise<InlinedResponse[]> {
  return inPool(rec.items, READS_AT_ONCE, async (item, i): Promise<InlinedResponse> => {
    const meta = item.metadata ? { metadata: item.metadata } : {};
    const task = tasks[i] ?? null;
    const failure = failureOf(item, task);
    if (failure || !task) return { ...(failure ? { error: failure } : {}), ...meta };
    try {
      const candidates = await Promise.all((task.candidates ?? []).map((c) => inlineCandidate(src, c)));
      const response = {
        candidates,
        ...(task.model_version ? { modelVersion: task.model_version } : {}),
        ...(task.response_id ? { responseId: task.response_id } : {}),
      };
      return { response, ...meta };
    } catch (err) {
      const why = err instanceof UnusableUrl ? err.message : 'it is not available';
      return {
        error: rpcStatus(
          'upstream_error',
          `Task ${task.id} succeeded, but its image could not be read back (${why}); ` +
            `GET /v1/tasks/${task.id}/content redirects to it.`,
        ),
        ...meta,
      };
    }
  });
}
