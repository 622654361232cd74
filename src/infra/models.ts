// Model lookup by kind, shared by the image, chat and video services.
import type { Model } from '../config.js';
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
