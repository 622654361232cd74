// OpenAI's images API and those that speak it (relays; Seedream on Volcengine Ark and BytePlus
// ModelArk): POST {baseUrl}{generationsPath}, or, with reference images, POST {baseUrl}{editsPath}
// as multipart (or the generations body's `image` field, where the upstream has no edits call).
// Sent with the official `openai` client: its retries are off (Kiln decides what may be resent) and
// its injected fetch awaits the dispatch mark right before the request leaves.
import OpenAI, { APIError } from 'openai';
import type { BlobStore } from '../../../src/blobs/local.js';
import type { ImageUpstream } from '../../../src/config/models.js';
import { openaiImagesFields, type OpenAIImagesFields } from '../../../src/shared/openai-images.js';
import type { SafeFetch } from '../../../src/infra/safe-fetch.js';
import { abortableSleep } from '../../../src/shared/abortable-sleep.js';
import type { GenerationResult, ImageRequest } from '../../../src/shared/image-task.js';
import { referenceImages } from '../../../src/shared/prompt.js';
import { causeCode, notDispatched } from '../../../src/upstreams/answers.js';
import { TransportFailure, UpstreamFailure } from '../../../src/upstreams/failures.js';
import { parseRetryAfter } from '../../../src/upstreams/retry-after.js';
import type { ImageCall, ImageCallProvider } from '../contract.js';
import { downloadReference } from '../references.js';
import { failureOf, isRateLimit, storeImages, type ImagesAnswer } from './answers.js';

export interface OpenAIImagesDeps {
  blobs: BlobStore;
  /** SSRF-guarded download: the task's reference images, and images the upstream answers as URLs. */
  fetchReference: SafeFetch;
}

interface Reference {
  mimeType: string;
  data: Buffer;
}

const EXTENSIONS: Record<string, string> = { 'image/jpeg': 'jpg', 'image/webp': 'webp', 'image/gif': 'gif' };

export class OpenAIImagesProvider implements ImageCallProvider {
  constructor(private readonly deps: OpenAIImagesDeps) {}

  async generate({ input, model, key, signal, dispatching }: ImageCall): Promise<GenerationResult> {
    const deadline = Date.now() + model.timeoutMs;
    const mapped = openaiImagesFields(input.request, model);
    // Submit refused such a request already; a models file changed since is the only way here.
    if ('refused' in mapped)
      throw new UpstreamFailure(
        'invalid_request',
        `${mapped.refused.field} "${mapped.refused.got.slice(0, 60)}" cannot be sent to this channel; ` +
          `allowed: ${mapped.refused.allowed.join(', ')}.`,
      );
    const refs = await this.references(input.request, model, signal);
    const edits = refs.length > 0 && model.referencesIn === 'edits';
    const path = edits ? model.editsPath : model.generationsPath;
    const body = edits ? editsForm(mapped.fields, model, refs) : generationsBody(mapped.fields, model, refs);
    const headers: Record<string, string> = {};
    // openai-node sends no Idempotency-Key of its own (its client sets no idempotency header), and
    // OpenAI documents none for images: only a channel said to deduplicate gets the task id.
    if (model.idempotent) headers['Idempotency-Key'] = input.id;

    for (let retry = 0; ; retry++) {
      const sent = sender(dispatching);
      let answer: unknown;
      try {
        answer = await client(model, key, sent.fetch).post(path, { body, headers, signal });
      } catch (err) {
        if (signal.aborted) throw err;
        if (sent.failed) throw sent.failed;
        if (!(err instanceof APIError) || err.status === undefined)
          // The answer broke off after its request left (its headers or body cut).
          throw new TransportFailure(`upstream connection failed (${causeCode(err) ?? (err as Error).message})`, true);
        if (isRateLimit(err)) {
          // A 429 about speed, not money, is a refusal: resending is safe even when not idempotent.
          const after = parseRetryAfter(err.headers?.get('retry-after'));
          const wait = after === undefined ? model.rateLimitBackoffMs * 2 ** retry : Math.round(after * 1000);
          if (retry < model.rateLimitRetries && Date.now() + wait < deadline) {
            await abortableSleep(wait, signal);
            continue;
          }
        }
        throw failureOf(err, key, model.idempotent, retry);
      }
      return {
        response_id: input.id,
        model_version: model.upstreamModel ?? model.id,
        candidates: await storeImages(answer as ImagesAnswer, mapped.fields, {
          blobs: this.deps.blobs,
          download: (url) => this.deps.fetchReference(url, signal, MAX_IMAGE_BYTES),
          key,
        }),
      };
    }
  }

  /** The task's reference images as bytes: inline ones decoded, URLs downloaded through the guard. */
  private async references(request: ImageRequest, model: ImageUpstream, signal: AbortSignal): Promise<Reference[]> {
    return Promise.all(
      referenceImages(request).map(async (r, i) => {
        if (!/^https?:/i.test(r.data))
          return { mimeType: r.mimeType ?? 'image/png', data: Buffer.from(r.data, 'base64') };
        const got = await downloadReference(
          this.deps.fetchReference,
          r.data,
          signal,
          `Reference image ${i + 1}`,
          model.referenceMaxBytes,
        );
        return { mimeType: got.mimeType, data: Buffer.from(got.data, 'base64') };
      }),
    );
  }
}

/** Largest image copied from an upstream's URL answer (a 4K PNG is some tens of MiB at most). */
const MAX_IMAGE_BYTES = 64 * 1024 * 1024;

/** The fields the upstream takes in both calls: the upstream's model name and the mapped options. */
function common(fields: OpenAIImagesFields, model: ImageUpstream): Record<string, string | number> {
  return {
    model: model.upstreamModel ?? model.id,
    ...fields,
    ...(model.responseFormat ? { response_format: model.responseFormat } : {}),
  };
}

function generationsBody(fields: OpenAIImagesFields, model: ImageUpstream, refs: Reference[]) {
  const images = refs.map((r) => `data:${r.mimeType};base64,${r.data.toString('base64')}`);
  return {
    ...common(fields, model),
    // Seedream takes one reference as a string, several as an array.
    ...(images.length ? { image: images.length === 1 ? images[0] : images } : {}),
  };
}

/** The edits call as openai-node's `images.edit` sends it: text fields, then `image[]` files. */
function editsForm(fields: OpenAIImagesFields, model: ImageUpstream, refs: Reference[]): FormData {
  const form = new FormData();
  for (const [k, v] of Object.entries(common(fields, model))) form.append(k, String(v));
  refs.forEach((r, i) =>
    form.append(
      'image[]',
      new Blob([new Uint8Array(r.data)], { type: r.mimeType }),
      `image-${i + 1}.${EXTENSIONS[r.mimeType] ?? 'png'}`,
    ),
  );
  return form;
}

/**
 * The fetch the client is given: it awaits the dispatch mark right before the request can leave,
 * and keeps what went wrong before or at the send, which the client would wrap beyond recognition.
 */
function sender(dispatching: () => Promise<void>) {
  const s: { failed?: Error; fetch: typeof fetch } = {
    fetch: async (url, init) => {
      try {
        await dispatching();
      } catch (err) {
        s.failed = err as Error;
        throw err;
      }
      try {
        return await fetch(url, init);
      } catch (err) {
        if (!init?.signal?.aborted) {
          const code = causeCode(err);
          s.failed = new TransportFailure(
            `upstream connection failed (${code ?? (err as Error).message})`,
            !notDispatched(code),
          );
        }
        throw err;
      }
    },
  };
  return s;
}

/**
 * A client for one call. Everything it would read from the worker's environment (OPENAI_API_KEY,
 * OPENAI_ORG_ID, OPENAI_PROJECT_ID, OPENAI_ADMIN_KEY, OPENAI_BASE_URL, OPENAI_LOG) is set here, so
 * no other key or header can reach a channel; the channel's budget is Kiln's (the signal).
 */
function client(model: ImageUpstream, key: string | undefined, fetchFn: typeof fetch): OpenAI {
  return new OpenAI({
    // The client insists on a key; a channel without one (`credential: none`) sends no header.
    apiKey: key ?? 'none',
    ...(key ? {} : { defaultHeaders: { Authorization: null } }),
    adminAPIKey: null,
    organization: null,
    project: null,
    webhookSecret: null,
    baseURL: model.baseUrl!.replace(/\/+$/, ''),
    maxRetries: 0,
    timeout: model.timeoutMs + 60_000,
    logLevel: 'off',
    fetch: fetchFn,
  });
}
