// Direct form: generateContent answers with the images themselves, in the Gemini response shape.
// Each call still runs as one image-task workflow (started, then awaited), so operators see it
// in the Temporal Web UI and in task lists like any other task.
import type { Client } from '@temporalio/client';
import type { ImageModel } from '../config/models.js';
import { ERROR_STATUS, KilnError, type ErrorCode } from '../shared/errors.js';
import { TERMINAL_STATUSES } from '../shared/task.js';
import type { Candidate, ImageRequest, Part } from '../shared/image-task.js';
import type { Caller } from '../infra/callers.js';
import type { Blobs } from '../blobs/stores.js';
import { UnusableUrl, type SafeFetch } from '../infra/safe-fetch.js';
import type { ImageTaskService } from './service.js';
import type { WebhookTarget } from '../shared/webhook-types.js';
import { validateSubmit } from './validate.js';
// Type only: the handle's result is typed by the workflow function, whose code the API never loads.
import type { imageTaskWorkflow } from '../../workflows/image-task.js';
import { withDeadline } from '../shared/deadline.js';

/** The contract's limit for the direct request form (task submissions allow 8). */
export const DIRECT_REFERENCE_IMAGES = 5;

export type DirectOutput = 'url' | 'base64';

export interface DirectResponse {
  candidates: Candidate[];
  modelVersion?: string;
  responseId?: string;
}

/**
 * Checks a direct request: `output` may be `url` or `base64` (the default), at most 5 reference
 * images; everything else as for task submissions.
 */
export function validateDirect(
  raw: unknown,
  queryOutput: string | undefined,
  model: ImageModel,
): { request: ImageRequest; output: DirectOutput } {
  const body = isObject(raw) ? raw : null;
  const gc = isObject(body?.generationConfig) ? body.generationConfig : undefined;
  const ic = isObject(gc?.imageConfig) ? gc.imageConfig : undefined;
  const asked = [queryOutput, ic?.output, body?.output].filter((o) => o !== undefined);
  if (asked.some((o) => o !== 'url' && o !== 'base64'))
    throw new KilnError('invalid_request', 'output must be "url" or "base64" (the default) on this model.');
  if (asked.includes('url') && asked.includes('base64'))
    throw new KilnError('invalid_request', 'output is given twice with different values.');
  const contents = Array.isArray(body?.contents) ? body.contents : [];
  const refs = contents
    .flatMap((c) => (isObject(c) && Array.isArray(c.parts) ? c.parts : []))
    .filter((p) => isObject(p) && p.inlineData !== undefined).length;
  if (refs > DIRECT_REFERENCE_IMAGES) {
    throw new KilnError(
      'too_many_reference_images',
      `${refs} reference images were sent; at most ${DIRECT_REFERENCE_IMAGES} are ` +
        `allowed on a direct generateContent request.`,
    );
  }
  // The rest of the checks are the task form's; its output switch is settled above.
  const cleaned = body && {
    ...body,
    output: undefined,
    ...(gc ? { generationConfig: { ...gc, ...(ic ? { imageConfig: { ...ic, output: undefined } } : {}) } } : {}),
  };
  return { request: validateSubmit(cleaned ?? raw, 'url', model), output: asked.includes('url') ? 'url' : 'base64' };
}

export class DirectService {
  constructor(
    private readonly tasks: ImageTaskService,
    private readonly temporal: Client,
    private readonly blobs: Blobs,
    /** For result images an upstream returned as URLs, when base64 is asked for. */
    private readonly fetchImage: SafeFetch,
  ) {}

  async generate(
    caller: Caller,
    model: ImageModel,
    request: ImageRequest,
    output: DirectOutput,
    idempotencyKey?: string,
    webhook?: WebhookTarget,
  ): Promise<{ taskId: string; body: DirectResponse; replayed: boolean }> {
    const submitted = await this.tasks.submit(caller, model, request, { idempotencyKey, direct: output, webhook });
    const { id } = submitted.response;
    // A replay of a finished task answers from its record (Temporal may no longer keep the
    // workflow); otherwise the workflow's result, which every submit of one key awaits alike.
    const record =
      submitted.replayed && TERMINAL_STATUSES.includes(submitted.record.status)
        ? submitted.record
        : await this.temporal.workflow.getHandle<typeof imageTaskWorkflow>(id).result();
    if (record.status === 'uncertain') {
      throw new KilnError(
        'upstream_error',
        `Task ${id}: the outcome is uncertain. ${record.uncertain_reason ?? ''}`.trim(),
      );
    }
    if (record.status !== 'succeeded' || !record.candidates) {
      const code =
        record.error?.code && record.error.code in ERROR_STATUS ? (record.error.code as ErrorCode) : 'upstream_error';
      throw new KilnError(code, record.error?.message ?? `Task ${id} ended ${record.status}.`);
    }
    const candidates =
      output === 'url' ? record.candidates : await Promise.all(record.candidates.map((c) => this.inline(c)));
    return {
      taskId: id,
      body: { candidates, modelVersion: record.model_version, responseId: record.response_id },
      replayed: submitted.replayed,
    };
  }

  private async inline(c: Candidate): Promise<Candidate> {
    const parts = await Promise.all(
      c.content.parts.map(async (p): Promise<Part> => {
        if (!p.inlineData) return p;
        const url = p.inlineData.data;
        const stored = await this.blobs.read(url);
        if (stored)
          return {
            inlineData: { mimeType: p.inlineData.mimeType ?? stored.mimeType, data: stored.data.toString('base64') },
          };
        try {
          const got = await withDeadline(30_000, (signal) => this.fetchImage(url, signal));
          return {
            inlineData: { mimeType: p.inlineData.mimeType ?? got.mediaType, data: got.data.toString('base64') },
          };
        } catch (err) {
          const why = err instanceof UnusableUrl ? err.message : 'no answer in time';
          throw new KilnError(
            'upstream_error',
            `The upstream returned an image URL that could not be read ` +
              `back as base64 (${why}); ask for output=url instead.`,
          );
        }
      }),
    );
    return { ...c, content: { ...c.content, parts } };
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
