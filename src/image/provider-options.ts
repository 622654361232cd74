// Submit-time checks of what a model's providers can express: an image option a provider cannot
// send is refused with 400, naming the field and the values it takes, never silently dropped.
// Every image surface (generateContent, OpenAI Images, Gemini Batch, the console, the CLI) comes
// through validateSubmit, which calls this once the request is parsed.
import type { ImageModel } from '../config/models.js';
import type { ImageProviderName } from '../config/providers.js';
import type { ImageRequest } from '../shared/image-task.js';
import { KilnError } from '../shared/errors.js';
import { dashscopeImageTask } from '../shared/dashscope.js';
import { openaiImagesFields } from '../shared/openai-images.js';
import { falImageRefusal } from '../shared/fal.js';
import { imageInputRefusal } from '../shared/replicate-input.js';
import { comfyuiImageRefusal } from '../shared/comfyui.js';

/** One option a provider cannot express: the field as the caller wrote it, and what it takes instead. */
export interface OptionRefusal {
  field: string;
  got: string;
  allowed: readonly string[];
}

/** A provider's check of one parsed request; null when it can send everything asked. */
export type ImageOptionCheck = (request: ImageRequest, model: ImageModel) => OptionRefusal | null;

/** Each openai-images channel of the model must be able to send the request (their `sizes` may differ). */
const openaiImages: ImageOptionCheck = (request, model) => {
  for (const channel of model.channels.filter((c) => c.provider === 'openai-images')) {
    const r = openaiImagesFields(request, channel);
    if ('refused' in r) return r.refused;
  }
  return null;
};

/** Providers with options of their own to check; the others send what validateSubmit lets through. */
const CHECKS: Partial<Record<ImageProviderName, ImageOptionCheck>> = {
  // Each dashscope channel's upstream model decides what it takes (Qwen-Image's five sizes, Wan's n ≤ 4, i2i's images).
  dashscope: (request, model) => {
    for (const c of model.channels) {
      if (c.provider !== 'dashscope') continue;
      const r = dashscopeImageTask(request, c.upstreamModel ?? model.id);
      if ('refusal' in r) return r.refusal;
    }
    return null;
  },
  'openai-images': openaiImages,
  fal: (request) => falImageRefusal(request),
  // Each replicate channel's own input names: the task may go to any of them.
  replicate: (request, model) => {
    for (const c of model.channels)
      if (c.provider === 'replicate') {
        const r = imageInputRefusal(request, c.inputNames);
        if (r) return r;
      }
    return null;
  },
  // Each box's workflow and node mapping: the task may go to any of them.
  comfyui: (request, model) => {
    for (const c of model.channels)
      if (c.provider === 'comfyui') {
        const r = comfyuiImageRefusal(request, c);
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
