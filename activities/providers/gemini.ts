// Gemini-compatible upstream: POST {baseUrl}/v1beta/models/{model}:generateContent.
import type { BlobStore } from '../../src/services/blobs.js';
import type { TaskFailureCode } from '../../src/shared/errors.js';
import type { Candidate, GenerationResult, Part } from '../../src/shared/task.js';
import { TransportFailure, UpstreamFailure, type ImageCall, type ImageProvider } from './types.js';

// Errors that happen before a single byte of the request can have left this machine.
const NOT_DISPATCHED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);
const MAX_MESSAGE = 300;

export function statusToCode(status: number): TaskFailureCode {
  if (status === 401 || status === 403) return 'auth_failed';
  if (status === 402) return 'insufficient_balance';
  if (status === 429) return 'upstream_rate_limited';
  if (status === 408 || status === 504) return 'upstream_timeout';
  if (status >= 400 && status < 500) return 'invalid_request';
  return 'upstream_error';
}

export class GeminiImageProvider implements ImageProvider {
  constructor(private readonly blobs: BlobStore, private readonly configuredKey: (model: string) => string | undefined) {}

  async generate({ input, model, signal, dispatching }: ImageCall): Promise<GenerationResult> {
    const key = model.credential === 'passthrough' ? input.credential : this.configuredKey(model.id);
    const url = `${model.baseUrl!.replace(/\/+$/, '')}/v1beta/models/${encodeURIComponent(model.upstreamModel ?? model.id)}:generateContent`;
    const { contents, generationConfig, tools, systemInstruction } = input.request;
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (key) headers['x-goog-api-key'] = key;
    if (model.idempotent) headers['idempotency-key'] = input.id;
    await dispatching();
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ contents, generationConfig, tools, systemInstruction }), signal });
      text = await res.text();
    } catch (err) {
      if (signal.aborted) throw err;
      const code = causeCode(err);
      throw new TransportFailure(`upstream connection failed (${code ?? (err as Error).message})`, !NOT_DISPATCHED.has(code ?? ''));
    }
    if (!res.ok) throw new UpstreamFailure(statusToCode(res.status), `upstream answered ${res.status}: ${upstreamMessage(text, key)}`);
    let body: { responseId?: string; modelVersion?: string; candidates?: Candidate[] };
    try {
      body = JSON.parse(text);
    } catch {
      throw new UpstreamFailure('upstream_error', 'upstream answered with a body that is not JSON');
    }
    const candidates = await Promise.all((body.candidates ?? []).map((c) => this.storeImages(c)));
    if (!candidates.some((c) => c.content.parts.some((p) => p.inlineData))) {
      throw new UpstreamFailure('upstream_error', 'upstream answered without an image');
    }
    return { response_id: body.responseId ?? input.id, model_version: body.modelVersion ?? model.upstreamModel ?? model.id, candidates };
  }

  /** Keeps text parts in order; replaces base64 images by stored URLs; drops parts that are neither. */
  private async storeImages(c: Candidate): Promise<Candidate> {
    const parts: Part[] = [];
    for (const p of c.content?.parts ?? []) {
      if (typeof p.text === 'string') parts.push({ text: p.text });
      const d = p.inlineData;
      if (!d || typeof d.data !== 'string' || !d.mimeType?.startsWith('image/')) continue;
      const data = d.data.startsWith('http') ? d.data : await this.blobs.put(Buffer.from(d.data, 'base64'), d.mimeType);
      parts.push({ inlineData: { mimeType: d.mimeType, data } });
    }
    return { content: { role: 'model', parts }, finishReason: c.finishReason ?? 'STOP', index: c.index };
  }
}

function causeCode(err: unknown): string | undefined {
  const c = (err as { cause?: { code?: string } }).cause;
  return c?.code;
}

/** The upstream's own error message, trimmed, with the caller's key masked should it be echoed. */
export function upstreamMessage(text: string, key?: string): string {
  let msg = text;
  try {
    const j = JSON.parse(text) as { error?: { message?: string } | string };
    msg = typeof j.error === 'string' ? j.error : j.error?.message ?? text;
  } catch { /* not JSON: keep the text */ }
  if (key) msg = msg.split(key).join('[redacted]');
  msg = msg.replace(/\s+/g, ' ').trim();
  return msg.length > MAX_MESSAGE ? `${msg.slice(0, MAX_MESSAGE)}…` : msg || '(no message)';
}
