// Reference images travel to the upstream as URLs unless the model asks for inline bytes; then the
// activity downloads them itself, through the SSRF-guarded fetcher.
import type { ImageUpstream } from '../../src/config/models.js';
import { createSafeFetch, UnusableUrl, type SafeFetch } from '../../src/infra/safe-fetch.js';
import type { ImageRequest, Part } from '../../src/shared/image-task.js';
import { deadline } from '../../src/shared/deadline.js';
import { UpstreamFailure } from '../../src/upstreams/failures.js';

/** Media types upstream image models accept as input; SVG (a document, not a picture) is not one. */
export const REFERENCE_TYPES = new Set([
  'image/png',
  'image/jpeg',
  'image/webp',
  'image/gif',
  'image/heic',
  'image/heif',
]);
/** One slow reference host must not eat the whole upstream (or create) budget. */
const REFERENCE_TIMEOUT_MS = 15_000;

/**
 * The request with every reference URL replaced by its bytes (base64 `inlineData`). A reference that
 * cannot be used ends the task invalid_request: the caller sent it, and resending will not help.
 */
export async function inlineReferences(
  request: ImageRequest,
  fetch: SafeFetch,
  model: ImageUpstream,
  signal: AbortSignal,
): Promise<ImageRequest> {
  let n = 0;
  const jobs: Promise<void>[] = [];
  const contents = request.contents.map((c) => ({
    ...c,
    parts: c.parts.map((p): Part => {
      // Bytes already inline (uploads of POST /v1/images/edits) need no download.
      if (!p.inlineData || !/^https?:/i.test(p.inlineData.data)) return p;
      const index = ++n;
      const out: Part = { ...p, inlineData: { ...p.inlineData } };
      jobs.push(
        downloadReference(fetch, p.inlineData.data, signal, `Reference image ${index}`, model.referenceMaxBytes).then(
          (inline) => {
            out.inlineData = inline;
          },
        ),
      );
      return out;
    }),
  }));
  // allSettled first: no download keeps running after the task has already failed on another one.
  const settled = await Promise.allSettled(jobs);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  return { ...request, contents };
}

/**
 * The caller's reference image as base64 and its media type, through the SSRF guard. One that cannot
 * be used fails invalid_request, `name` saying which: the caller sent it, and sending again will not help.
 */
export async function downloadReference(
  fetch: SafeFetch,
  url: string,
  signal: AbortSignal,
  name: string,
  maxBytes?: number,
): Promise<{ mimeType: string; data: string }> {
  const timeout = deadline(REFERENCE_TIMEOUT_MS);
  try {
    const got = await fetch(url, AbortSignal.any([signal, timeout.signal]), maxBytes);
    return { mimeType: got.mediaType, data: got.data.toString('base64') };
  } catch (err) {
    if (signal.aborted) throw err;
    const why = timeout.expired
      ? `no answer within ${REFERENCE_TIMEOUT_MS} ms`
      : err instanceof UnusableUrl
        ? err.message
        : 'it could not be downloaded';
    throw new UpstreamFailure('invalid_request', `${name} cannot be used: ${why}.`);
  } finally {
    timeout.clear();
  }
}

/** The SSRF-guarded downloader for reference images; `allow` is the test-only exemption list. */
export function referenceFetcher(allow: string[] = []): SafeFetch {
  return createSafeFetch({
    maxBytes: 10 * 1024 * 1024,
    maxRedirects: 3,
    acceptType: (t) => REFERENCE_TYPES.has(t),
    allow,
  });
}
