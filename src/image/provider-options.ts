// Submit-time checks of what a model's providers can express: an image option a provider cannot
// send is refused with 400, naming the field and the values it takes, never silently dropped.
// Every image surface (generateContent, OpenAI Images, Gemini Batch, the console, the CLI) comes
// through validateSubmit, which calls this once the request is parsed.
import type { ImageModel } from '../config/models.js';
import type { ImageProviderName } from '../config/providers.js';
import type { ImageRequest } from '../shared/image-task.js';
import { KilnError } from '../shared/errors.js';
import { imageInputRefusal } from '../shared/replicate-input.js';

/** One option a provider cannot express: the field as the caller wrote it, and what it takes instead. */
export interface OptionRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

/** A provider's check of one parsed request; null when it can send everything asked. */
export type ImageOptionCheck = (request: ImageRequest, model: ImageModel) => OptionRefusal | null;

/** Providers with options of their own to check; the others send what validateSubmit lets through. */
const CHECKS: Partial<Record<ImageProviderName, ImageOptionCheck>> = {
  // Each channel's own input names: the task may go to any of them.
  replicate: (request, model) => {
    for (const c of model.channels)
      if (c.provider === 'replicate') {
        const r = imageInputRefusal(request, c.inputNames);
        if (r) return r;
      }
    return null;
  },
};

/** Throws invalid_request when any channel's provider cannot express an option of `request`. */
export function refuseInexpressible(request: ImageRequest, model: ImageModel): void {
  for (const provider of new Set(model.channels.map((c) => c.provider))) {
    const r = CHECKS[provider]?.(request, model);
    if (r)
      throw new KilnError(
        'invalid_request',
        `${r.field} "${r.got.slice(0, 60)}" cannot be sent to model ${model.id} (provider ${provider}); ` +
          `allowed: ${r.allowed.join(', ')}.`,
      );
  }
}
