// The gemini-veo provider's HTTP plumbing: Google's error answers in Kiln's terms, and the video
// download, whose redirects are followed by hand so the key never leaves the channel's own host.
import type { BlobStore } from '../../../src/blobs/local.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';
import { causeCode, isRefusalStatus, statusToCode, upstreamMessage } from '../../../src/upstreams/answers.js';
import type { TaskFailureCode } from '../../../src/shared/errors.js';
import { rpcName, rpcToCode } from '../../../src/shared/veo.js';
import type { VideoResult } from '../../../src/shared/video-task.js';
import { TransportFailure, UpstreamFailure } from '../../../src/upstreams/failures.js';
import { storeDownload } from '../http.js';
import type { VideoCall } from '../contract.js';

/** Redirect hops a download follows (Google's file URI answers one, to its storage). */
export const MAX_DOWNLOAD_REDIRECTS = 5;

interface GoogleErrorBody {
  error?: {
    code?: number;
    message?: string;
    status?: string;
    details?: { '@type'?: string; reason?: string; retryDelay?: string }[];
  };
}

/**
 * A non-2xx answer with Google's error body (`{error: {code, message, status, details}}`): the
 * rpc status names the cause when it is there, else the HTTP status does. A key Google does not
 * take (ErrorInfo `API_KEY_INVALID`, sent with HTTP 400) is the channel's credential: auth_failed.
 */
export class VeoHttpFailure extends UpstreamFailure {
  constructor(
    readonly status: number,
    text: string,
    key: string | undefined,
    retryAfterHeader: string | null,
    lead = 'upstream answered',
  ) {
    const body = parseError(text);
    const rpc = rpcName(body?.status);
    const keyRefused = (body?.details ?? []).some((d) => /^API_KEY_/.test(String(d?.reason ?? '')));
    const code: TaskFailureCode = keyRefused
      ? 'auth_failed'
      : rpc !== 'UNKNOWN'
        ? rpcToCode(rpc)
        : statusToCode(status);
    const retryAfterMs = retryAfter(retryAfterHeader, body);
    super(code, `${lead} ${status}${rpc !== 'UNKNOWN' ? ` ${rpc}` : ''}: ${upstreamMessage(text, key)}`, false, {
      status,
      // Refused before any processing: another channel may take the task.
      refused: isRefusalStatus(status) || keyRefused,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    });
  }
  override get transient(): boolean {
    return this.status >= 500 || this.status === 429 || this.status === 408;
  }
}

function parseError(text: string): GoogleErrorBody['error'] | undefined {
  try {
    const j = JSON.parse(text) as GoogleErrorBody;
    return j && typeof j.error === 'object' && j.error !== null ? j.error : undefined;
  } catch {
    return undefined;
  }
}

/** Retry-After, else google.rpc.RetryInfo's `retryDelay` ("30s", "1.5s"). */
function retryAfter(header: string | null, body: GoogleErrorBody['error']): number | undefined {
  const seconds = parseRetryAfter(header);
  if (seconds !== undefined) return seconds * 1000;
  const delay = body?.details?.find((d) => String(d?.['@type'] ?? '').endsWith('google.rpc.RetryInfo'))?.retryDelay;
  const m = typeof delay === 'string' ? /^(\d{1,6}(?:\.\d{1,9})?)s$/.exec(delay) : null;
  return m ? Math.round(Number(m[1]) * 1000) : undefined;
}

/**
 * Downloads the finished video into the blob store. Google answers the file URI (on the API's own
 * host, with the key) with a redirect to its storage: hops are followed by hand, the key goes only
 * to the channel's own origin (never to where a redirect leads elsewhere), at most
 * MAX_DOWNLOAD_REDIRECTS of them, http(s) only and never from https down to http.
 */
export async function downloadVeoVideo(blobs: BlobStore, call: VideoCall, uri: string): Promise<VideoResult> {
  const own = new URL(call.model.baseUrl!).origin;
  let url = new URL(uri);
  for (let hop = 0; ; hop++) {
    if (url.protocol !== 'https:' && url.protocol !== 'http:')
      throw new UpstreamFailure(
        'upstream_error',
        `the video download leads to a ${url.protocol} URL, which is not fetched`,
      );
    const headers: Record<string, string> = call.key && url.origin === own ? { 'x-goog-api-key': call.key } : {};
    let res: Response;
    try {
      res = await fetch(url, { headers, signal: call.signal, redirect: 'manual' });
    } catch (err) {
      if (call.signal.aborted) throw err;
      // A read: safe to repeat, so Temporal retries it.
      throw new TransportFailure(`download failed (${causeCode(err) ?? (err as Error).message})`, false);
    }
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      await res.body?.cancel().catch(() => undefined);
      if (hop >= MAX_DOWNLOAD_REDIRECTS)
        throw new UpstreamFailure(
          'upstream_error',
          `the video download took more than ${MAX_DOWNLOAD_REDIRECTS} redirects`,
        );
      const next = new URL(location, url);
      if (url.protocol === 'https:' && next.protocol === 'http:')
        throw new UpstreamFailure(
          'upstream_error',
          'the video download redirects from https to http, which is not followed',
        );
      url = next;
      continue;
    }
    if (!res.ok) {
      const text = await res.text().catch(() => '');
      throw new VeoHttpFailure(
        res.status,
        text,
        call.key,
        res.headers.get('retry-after'),
        'the finished file could not be downloaded: upstream answered',
      );
    }
    return storeDownload(blobs, res, url.href, 'mp4', call.signal, call.key);
  }
}
