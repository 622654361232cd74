// Gemini-compatible upstream: POST {baseUrl}/v1beta/models/{model}:generateContent.
import type { BlobStore } from '../../../src/blobs/local.js';
import type { SafeFetch } from '../../../src/infra/safe-fetch.js';
import { abortableSleep } from '../../../src/shared/abortable-sleep.js';
import { upstreamKey } from '../../../src/shared/credentials.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';
import { isRefusalStatus, statusToCode, upstreamMessage } from '../../../src/upstreams/answers.js';
import type { GenerationResult } from '../../../src/shared/image-task.js';
import { fetchText, parseUpstreamJson } from '../../../src/upstreams/http.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';
import { parseGeminiResult, type GeminiResponse } from './image-result.js';
import { inlineReferences } from '../references.js';
import type { ImageCall, ImageCallProvider } from '../contract.js';

export interface GeminiDeps {
  blobs: BlobStore;
  /** Configured upstream keys (`credential: {env}`), by variable name. */
  keys: Record<string, string>;
  /** SSRF-guarded download, for models that send reference images inline. */
  fetchReference: SafeFetch;
}

export class GeminiImageProvider implements ImageCallProvider {
  constructor(private readonly deps: GeminiDeps) {}

  async generate({ input, model, signal, dispatching }: ImageCall): Promise<GenerationResult> {
    const deadline = Date.now() + model.timeoutMs;
    const key = upstreamKey(model, input.credential, this.deps.keys);
    const base = model.baseUrl!.replace(/\/+$/, '');
    const url = `${base}/v1beta/models/${encodeURIComponent(model.upstreamModel ?? model.id)}:generateContent`;
    const request = model.inlineReferences
      ? await inlineReferences(input.request, this.deps.fetchReference, model, signal)
      : input.request;
    const { contents, generationConfig, tools, systemInstruction } = request;
    const body = JSON.stringify({ contents, generationConfig, tools, systemInstruction });
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (key) headers['x-goog-api-key'] = key;
    if (model.idempotent) headers['idempotency-key'] = input.id;

    for (let retry = 0; ; retry++) {
      await dispatching();
      const { res, text } = await fetchText(url, { method: 'POST', headers, body, signal });
      if (res.status === 429) {
        // A 429 is a refusal, not a generation: resending is safe even to a non-idempotent upstream.
        const wait = retryDelay(res.headers.get('retry-after'), model.rateLimitBackoffMs * 2 ** retry);
        const fits = Date.now() + wait < deadline;
        if (retry < model.rateLimitRetries && fits) {
          await abortableSleep(wait, signal);
          continue;
        }
        const why =
          retry >= model.rateLimitRetries
            ? `after ${retry} ${retry === 1 ? 'retry' : 'retries'}`
            : `a retry in ${Math.ceil(wait / 1000)} s would pass the ${model.timeoutMs} ms budget`;
        const retryAfter = parseRetryAfter(res.headers.get('retry-after'));
        throw new UpstreamFailure(
          'upstream_rate_limited',
          `upstream answered 429 (${why}): ${upstreamMessage(text, key)}`,
          false,
          { status: 429, refused: true, ...(retryAfter !== undefined ? { retryAfterMs: retryAfter * 1000 } : {}) },
        );
      }
      if (!res.ok) {
        const code = statusToCode(res.status);
        // A 5xx reached the upstream; only an idempotent one may safely receive the request again.
        const retryable = code === 'upstream_error' && res.status >= 500 && model.idempotent;
        const retryAfter = res.status === 503 ? parseRetryAfter(res.headers.get('retry-after')) : undefined;
        throw new UpstreamFailure(code, `upstream answered ${res.status}: ${upstreamMessage(text, key)}`, retryable, {
          status: res.status,
          refused: isRefusalStatus(res.status),
          ...(retryAfter !== undefined ? { retryAfterMs: retryAfter * 1000 } : {}),
        });
      }
      const result = await parseGeminiResult(parseUpstreamJson<GeminiResponse>(text), this.deps.blobs);
      return {
        response_id: result.response_id ?? input.id,
        model_version: result.model_version ?? model.upstreamModel ?? model.id,
        candidates: result.candidates,
      };
    }
  }
}

/** How long to wait before resending after a 429: the upstream's Retry-After, else the backoff. */
export function retryDelay(header: string | null, backoffMs: number): number {
  const seconds = parseRetryAfter(header);
  return seconds === undefined ? backoffMs : Math.round(seconds * 1000);
}
