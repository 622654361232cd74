// HTTP plumbing of the video upstreams: JSON calls with Kiln's failure mapping, and capped downloads.
import type { BlobStore } from '../../src/blobs/local.js';
import { parseRetryAfter } from '../../src/upstreams/retry-after.js';
import { causeCode, isRefusalStatus, statusToCode, upstreamMessage } from '../../src/upstreams/answers.js';
import type { VideoResult } from '../../src/shared/video-task.js';
import { fetchText, parseUpstreamJson } from '../../src/upstreams/http.js';
import { TransportFailure, UpstreamFailure } from '../../src/upstreams/failures.js';

/** A non-2xx answer: its status tells a lasting refusal from a passing fault. */
export class HttpStatusFailure extends UpstreamFailure {
  constructor(
    readonly status: number,
    message: string,
    retryAfterMs?: number,
  ) {
    super(statusToCode(status), message, false, {
      status,
      refused: isRefusalStatus(status),
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    });
  }
  override get transient(): boolean {
    return this.status >= 500 || this.status === 429 || this.status === 408;
  }
}

/** Largest upstream file copied into the blob store. */
export const MAX_VIDEO_BYTES = 512 * 1024 * 1024;

const MIME_BY_TYPE: Record<string, string> = {
  mp4: 'video/mp4',
  webm: 'video/webm',
  mov: 'video/quicktime',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  webp: 'image/webp',
  gif: 'image/gif',
};

export async function requestJson(
  url: string,
  init: RequestInit & { signal: AbortSignal },
  key?: string,
): Promise<unknown> {
  const { res, text } = await fetchText(url, init);
  if (!res.ok) {
    // A refusal's Retry-After (429, 503) sets how long the task waits before sending again.
    const retryAfter = isRefusalStatus(res.status) ? parseRetryAfter(res.headers.get('retry-after')) : undefined;
    throw new HttpStatusFailure(
      res.status,
      `upstream answered ${res.status}: ${upstreamMessage(text, key)}`,
      retryAfter === undefined ? undefined : retryAfter * 1000,
    );
  }
  return parseUpstreamJson(text);
}

/** Downloads one file (at most MAX_VIDEO_BYTES) and stores it; returns its Kiln URL. */
export async function copyToBlobs(
  blobs: BlobStore,
  url: string,
  fileType: string | undefined,
  signal: AbortSignal,
  headers: Record<string, string> = {},
  key?: string,
): Promise<VideoResult> {
  let res: Response;
  try {
    res = await fetch(url, { headers, signal });
  } catch (err) {
    if (signal.aborted) throw err;
    throw new TransportFailure(`download failed (${causeCode(err) ?? (err as Error).message})`, false);
  }
  return storeDownload(blobs, res, url, fileType, signal, key);
}

/** Stores a download's body (at most MAX_VIDEO_BYTES) once its answer has arrived; `url` names the file's type. */
export async function storeDownload(
  blobs: BlobStore,
  res: Response,
  url: string,
  fileType: string | undefined,
  signal: AbortSignal,
  key?: string,
): Promise<VideoResult> {
  if (!res.ok)
    throw new HttpStatusFailure(
      res.status,
      `the finished file could not be downloaded: upstream ` +
        `answered ${res.status}: ${upstreamMessage(await res.text().catch(() => ''), key)}`,
    );
  const declared = Number(res.headers.get('content-length') ?? 0);
  if (declared > MAX_VIDEO_BYTES)
    throw new UpstreamFailure(
      'upstream_error',
      `the finished file is ${declared} bytes; at most ${MAX_VIDEO_BYTES} are copied`,
    );
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body ?? []) {
      size += chunk.length;
      if (size > MAX_VIDEO_BYTES)
        throw new UpstreamFailure('upstream_error', `the finished file is over ${MAX_VIDEO_BYTES} bytes`);
      chunks.push(Buffer.from(chunk));
    }
  } catch (err) {
    if (err instanceof UpstreamFailure || signal.aborted) throw err;
    throw new TransportFailure(`download interrupted (${causeCode(err) ?? (err as Error).message})`, false);
  }
  const type = (fileType ?? extensionOf(url) ?? 'mp4').toLowerCase().replace(/^\./, '');
  const stored = await blobs.put(Buffer.concat(chunks), MIME_BY_TYPE[type] ?? 'application/octet-stream');
  return { url: stored, file_type: type };
}

function extensionOf(url: string): string | undefined {
  try {
    return /\.([A-Za-z0-9]{1,5})$/.exec(new URL(url).pathname)?.[1];
  } catch {
    return undefined;
  }
}
