// Provider-specific fields of the models file (openai-images, replicate, workflow-node and comfyui
// channels), with what each means; src/config/models.ts puts them into each kind's upstream fields.
import { z } from 'zod';
import { GPT_IMAGE_SIZES } from '../shared/openai-images.js';
import { workflowProblem, type ComfyWorkflow } from '../shared/comfyui.js';

/** A whole number with a default (and a floor): how every numeric field of the models file reads. */
export const int = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);

const SIZE_KEY = /^(\d{1,2}:\d{1,2})?(@[A-Za-z0-9.]{1,16})?$/;

/** The `openai-images` provider's settings (docs/providers.md): where its calls go and what they may carry. */
export const openaiImagesFields = {
  /**
   * openai-images: the generations call under baseUrl. OpenAI and most relays: the default;
   * Seedream on Volcengine Ark or BytePlus ModelArk: `/api/v3/images/generations`.
   */
  generationsPath: z
    .string()
    .regex(/^\/[^?#]*$/, 'a path starting with /')
    .default('/v1/images/generations'),
  /** openai-images: the edits call (multipart, with the reference images) under baseUrl. */
  editsPath: z
    .string()
    .regex(/^\/[^?#]*$/, 'a path starting with /')
    .default('/v1/images/edits'),
  /**
   * openai-images: how reference images travel. `edits`: files of a multipart call to editsPath
   * (OpenAI); `image`: data URIs in the generations body's `image` field (Seedream, which has no edits call).
   */
  referencesIn: z.enum(['edits', 'image']).default('edits'),
  /**
   * openai-images: Kiln's imageConfig `aspectRatio` (or `aspectRatio@imageSize`, or `@imageSize`
   * alone) → the upstream's `size`; a request whose ratio is not listed is refused at submit. The
   * default is gpt-image's three sizes.
   */
  sizes: z
    .record(z.string(), z.string().min(1).max(32))
    .superRefine((sizes, ctx) => {
      for (const k of Object.keys(sizes))
        if (!SIZE_KEY.test(k))
          ctx.addIssue({
            code: 'custom',
            path: [k],
            message: `"${k.slice(0, 40)}": keys look like 16:9, 16:9@2K or @2K`,
          });
    })
    .default({ ...GPT_IMAGE_SIZES }),
  /**
   * openai-images: the `response_format` asked for; unset sends none (gpt-image models always
   * answer b64_json and refuse the field; dall-e and Seedream answer url by default).
   */
  responseFormat: z.enum(['url', 'b64_json']).optional(),
  /** openai-images: the largest `n` (generationConfig.candidateCount) the upstream takes; Seedream takes no `n`: 1. */
  maxImages: int(10, 1),
};

/** replicate: a model's input name for one of Kiln's options; null when it has none (the option is refused then). */
export const inputName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'input names are identifiers such as aspect_ratio')
  .nullable()
  .optional();

/** Where a workflow-node or comfyui model puts a request field: `{nodeId, fieldName}` of the upstream workflow. */
const NodeFieldSchema = z.object({
  nodeId: z.string().min(1).max(100),
  fieldName: z.string().min(1).max(100),
  /** comfyui: a number is multiplied by this (seconds → frames at `scale` frames per second). */
  scale: z.number().positive().optional(),
});

/**
 * Where prompt, reference image, seconds and size go; comfyui also takes width and height (the
 * size as two numbers), seed and count (images per task).
 */
const NodesSchema = z
  .object({
    prompt: NodeFieldSchema.optional(),
    image: NodeFieldSchema.optional(),
    seconds: NodeFieldSchema.optional(),
    size: NodeFieldSchema.optional(),
    width: NodeFieldSchema.optional(),
    height: NodeFieldSchema.optional(),
    seed: NodeFieldSchema.optional(),
    count: NodeFieldSchema.optional(),
  })
  .default({});

/** The `comfyui` provider's settings (docs/providers.md, "ComfyUI"). */
export const comfyuiFields = {
  /** comfyui: the API-format workflow, a path relative to the models file (or absolute); read once at start. */
  workflowFile: z.string().min(1).optional(),
  /** comfyui: the workflow itself (what start-up reads from workflowFile). */
  workflow: z
    .record(z.string(), z.looseObject({ class_type: z.string(), inputs: z.record(z.string(), z.unknown()) }))
    .superRefine((w, ctx) => {
      const p = workflowProblem(w);
      if (p) ctx.addIssue({ code: 'custom', message: p });
    })
    .transform((w) => w as ComfyWorkflow)
    .optional(),
  /** comfyui, form workflow-node: the inputs the caller's nodeInfoList may set, as `nodeId.fieldName`. */
  allowedInputs: z.array(z.string().min(3).max(201)).max(256).optional(),
  nodes: NodesSchema,
};
