// Gemini-compatible upstream: POST {baseUrl}/v1beta/models/{model}:generateContent.
import type { BlobStore } from '../../src/infra/blobs.js';
import type { SafeFetch } from '../../src/infra/safe-fetch.js';
import { causeCode, NOT_DISPATCHED_CODES, statusToCode, upstreamMessage } from '../../src/shared/upstream.js';
import type { GenerationResult } from '../../src/shared/task.js';
import { parseGeminiResult, type GeminiResponse } from './gemini-result.js';
import { inlineReferences } from './references.js';
import { TransportFailure, UpstreamFailure, type ImageCall, type ImageProvider } from './types.js';

export interface GeminiDeps {
  blobs: BlobStore;
  /** The configured upstream key of a model whose credential is `{env}`. */
  configuredKey: (model: string) => string | undefined;
  /** SSRF-guarded download, for models that send reference images inline. */
  fetchReference: SafeFetch;
}

export class GeminiImageProvider implements ImageProvider {
  constructor(private readonly deps: GeminiDeps) {}

  async generate({ input, model, signal, dispatching }: ImageCall): Promise<GenerationResult> {
    const deadline = Date.now() + model.timeoutMs;
    const key = model.credential === 'passthrough' ? input.credential : this.deps.configuredKey(model.id);
    const url = `${model.baseUrl!.replace(/\/+$/, '')}/v1beta/models/${encodeURIComponent(model.upstreamModel ?? model.id)}:generateContent`;
    const request = model.inlineReferences ? await inlineReferences(input.request, this.deps.fetchReference, model, signal) : input.request;
    const { contents, generationConfig, tools, systemInstruction } = request;
    const body = JSON.stringify({ contents, generationConfig, tools, systemInstruction });
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (key) headers['x-goog-api-key'] = key;
    if (model.idempotent) headers['idempotency-key'] = input.id;

    for (let retry = 0; ; retry++) {
      await dispatching();
      let res: Response;
      let text: string;
      try {
        res = await fetch(url, { method: 'POST', headers, body, signal });
        text = await res.text();
      } catch (err) {
        if (signal.aborted) throw err;
        const code = causeCode(err);
        throw new TransportFailure(`upstream connection failed (${code ?? (err as Error).message})`, !NOT_DISPATCHED_CODES.has(code ?? ''));
      }
      if (res.status === 429) {
        // A 429 is a refusal, not a generation: resending is safe even to a non-idempotent upstream.
        const wait = retryDelay(res.headers.get('retry-after'), model.rateLimitBackoffMs * 2 ** retry);
        const fits = Date.now() + wait < deadline;
        if (retry < model.rateLimitRetries && fits) {
          await sleep(wait, signal);
          continue;
        }
        const why = retry >= model.rateLimitRetries ? `after ${retry} ${retry === 1 ? 'retry' : 'retries'}` : `a retry in ${Math.ceil(wait / 1000)} s would pass the ${model.timeoutMs} ms budget`;
        throw new UpstreamFailure('upstream_rate_limited', `upstream answered 429 (${why}): ${upstreamMessage(text, key)}`);
      }
      if (!res.ok) {
        const code = statusToCode(res.status);
        // A 5xx reached the upstream; only an idempotent one may safely receive the request again.
        const retryable = code === 'upstream_error' && res.status >= 500 && model.idempotent;
        throw new UpstreamFailure(code, `upstream answered ${res.status}: ${upstreamMessage(text, key)}`, retryable);
      }
      let parsed: GeminiResponse;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new UpstreamFailure('upstream_error', 'upstream answered with a body that is not JSON');
      }
      const result = await parseGeminiResult(parsed, this.deps.blobs);
      return { response_id: result.response_id ?? input.id, model_version: result.model_version ?? model.upstreamModel ?? model.id, candidates: result.candidates };
    }
  }
}

/** Retry-After in seconds or as an HTTP date, else the backoff; never negative. */
export function retryDelay(header: string | null, backoffMs: number): number {
  if (header !== null && header.trim() !== '') {
    const s = header.trim();
    if (/^\d+(\.\d+)?$/.test(s)) return Math.round(Number(s) * 1000);
    const at = Date.parse(s);
    if (!Number.isNaN(at)) return Math.max(0, at - Date.now());
  }
  return backoffMs;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => { clearTimeout(t); reject(signal.reason); };
    const t = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
