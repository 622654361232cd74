// A key's model allow-list (Caller.models, set in keys mode): every route that starts work for a
// model asks here first, before any workflow starts or any upstream is called.
import type { Caller } from '../infra/callers.js';
import { KilnError } from '../shared/errors.js';

export function assertModelAllowed(caller: Caller, model: string): void {
  if (caller.models && !caller.models.includes(model))
    throw new KilnError(
      'model_not_allowed',
      `This API key may not use model "${model}"; it may use: ${caller.models.join(', ')}.`,
    );
}

/** The models a caller may use, of those given (GET /v1/models lists only these). */
export const allowedModels = <M extends { id: string }>(caller: Caller, models: readonly M[]): readonly M[] =>
  caller.models ? models.filter((m) => caller.models!.includes(m.id)) : models;
