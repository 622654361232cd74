// Model lookup by kind, shared by the image, chat and video services, and the model catalogue of
// GET /v1/models.
import { z } from 'zod';
import { videoOptions, type Model } from '../config/models.js';
import { KilnError } from '../shared/errors.js';

export function findModel<K extends Model['kind']>(
  models: readonly Model[],
  kind: K,
  id: string,
): Extract<Model, { kind: K }> {
  const m = models.find((x) => x.id === id);
  if (m?.kind === kind) return m as Extract<Model, { kind: K }>;
  if (m)
    throw new KilnError(
      'model_not_found',
      `Model "${id}" is not ${kind === 'image' ? 'an' : 'a'} ${kind} model; ` +
        `GET /v1/models lists the models and their kinds.`,
    );
  throw new KilnError('model_not_found', `Model "${id}" does not exist; GET /v1/models lists the models.`);
}

/**
 * What `GET /v1/models` says about one model: the OpenAI list entry, plus (extension fields) what the
 * model accepts, so a client can offer only the values the model takes instead of learning them from refusals.
 */
export function modelEntry(m: Model) {
  const base = { id: m.id, object: 'model' as const, created: 0, owned_by: 'kiln', kind: m.kind };
  const description = m.description ?? null;
  if (m.kind === 'image') return { ...base, form: m.form, description, image_sizes: [...m.imageSizes] };
  if (m.kind === 'video') {
    const o = videoOptions(m);
    return { ...base, form: o.form, description, seconds: [...o.seconds], sizes: [...o.sizes] };
  }
  return { ...base, description };
}

export function modelList(models: readonly Model[]) {
  return { object: 'list' as const, data: models.map(modelEntry) };
}

export const ModelList = z
  .object({
    object: z.literal('list'),
    data: z.array(
      z.object({
        id: z.string(),
        object: z.literal('model'),
        created: z.number().int(),
        owned_by: z.string(),
        kind: z.enum(['image', 'chat', 'video']),
        form: z.string().optional().meta({
          description: 'image: `task` or `direct`; video: `video` or `workflow-node` (takes `nodeInfoList`)',
        }),
        description: z.string().nullable(),
        image_sizes: z
          .array(z.string())
          .optional()
          .meta({ description: 'Image models: the `imageConfig.imageSize` values the model accepts' }),
        seconds: z
          .array(z.string())
          .optional()
          .meta({ description: 'Video models: the `seconds` values the model accepts; the first is the default' }),
        sizes: z
          .array(z.string())
          .optional()
          .meta({ description: 'Video models: the `size` values the model accepts; the first is the default' }),
      }),
    ),
  })
  .meta({ id: 'ModelList' });
