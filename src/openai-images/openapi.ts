// Schemas of the OpenAI Images operations, for the OpenAPI document (routes.ts declares them). The
// handlers check the bodies themselves (params.ts, multipart.ts), with messages that name the
// model's allowed values; these schemas document the same rules.
import { z } from 'zod';
import { LIMITS } from '../shared/limits.js';
import { SubmitResponse } from '../image/openapi.js';
import { ASPECT_RATIOS, MAX_N, QUALITY_TIERS } from './params.js';
import { EDIT_LIMITS } from './multipart.js';
import { BACKGROUNDS, OUTPUT_FORMATS, QUALITIES } from '../shared/openai-images.js';

const fields = {
  model: z.string().meta({ description: 'An image model id (GET /v1/models, kind `image`)', example: 'kiln-image-1' }),
  prompt: z
    .string()
    .min(1)
    .meta({ description: `At most ${LIMITS.promptChars} characters`, example: 'a lighthouse at dusk' }),
  n: z
    .int()
    .min(1)
    .max(MAX_N)
    .nullable()
    .optional()
    .meta({ description: `Images to make, 1-${MAX_N} (default 1): one image task each` }),
  size: z
    .string()
    .regex(/^(auto|[1-9]\d{0,4}x[1-9]\d{0,4})$/)
    .nullable()
    .optional()
    .meta({
      description:
        '`auto` (default: the model decides) or `WIDTHxHEIGHT` whose ratio is one of ' +
        `${ASPECT_RATIOS.join(', ')} (imageConfig.aspectRatio); its longer side picks the smallest of the ` +
        "model's `image_sizes` tiers that covers it (1K up to 1024, 2K up to 2048, 4K up to 4096). On models " +
        'whose provider is openai-images: `auto` or one of the sizes the channel lists (`sizes`), sent as is.',
      example: '1024x1024',
    }),
  quality: z
    .enum([...new Set(['auto', ...Object.keys(QUALITY_TIERS), ...QUALITIES])] as [string, ...string[]])
    .nullable()
    .optional()
    .meta({
      description:
        "`auto` (default) or a resolution tier (imageConfig.imageSize) among the model's `image_sizes`: " +
        Object.entries(QUALITY_TIERS)
          .map(([q, t]) => `${q} ${t}`)
          .join(', ') +
        '. It overrides the tier `size` picks. On models whose provider is openai-images it is passed on as ' +
        `imageConfig.quality (${QUALITIES.join(', ')}).`,
    }),
  response_format: z.enum(['url', 'b64_json']).nullable().optional().meta({
    description: '`url` (default): the image URL `GET /v1/tasks/{id}/content` redirects to; `b64_json`: the bytes',
  }),
  background: z
    .enum(BACKGROUNDS)
    .nullable()
    .optional()
    .meta({ description: '`auto`; `transparent` and `opaque` only on models whose provider is openai-images' }),
  output_format: z
    .enum(OUTPUT_FORMATS)
    .nullable()
    .optional()
    .meta({ description: 'Only on models whose provider is openai-images (passed on as imageConfig.outputFormat)' }),
  stream: z.literal(false).nullable().optional().meta({ description: 'Streaming is not supported' }),
  user: z.string().nullable().optional().meta({ description: 'Accepted and not passed on' }),
  safety_identifier: z.string().nullable().optional().meta({ description: 'Accepted and not passed on' }),
};

export const ImageGenerateBody = z
  .object({
    ...fields,
    style: z.enum(['vivid', 'natural']).nullable().optional().meta({ description: 'Accepted and not passed on' }),
    moderation: z.enum(['auto', 'low']).nullable().optional().meta({ description: 'Accepted and not passed on' }),
  })
  .strict()
  .meta({ id: 'ImageGenerateRequest' });

const ImageFile = z.string().meta({ format: 'binary', description: 'A PNG, JPEG, WebP or GIF file' });

export const ImageEditBody = z
  .object({
    image: z
      .union([ImageFile, z.array(ImageFile).min(1).max(EDIT_LIMITS.images)])
      .optional()
      .meta({
        description:
          `1 to ${EDIT_LIMITS.images} image files, each at most ${EDIT_LIMITS.fileBytes} bytes (type told by ` +
          'its bytes), as `image` or repeated `image[]` (one of the two is required); each becomes an inline ' +
          'reference image after the prompt',
      }),
    'image[]': z
      .array(ImageFile)
      .max(EDIT_LIMITS.images)
      .optional()
      .meta({ description: 'Several files (the SDK sends arrays so)' }),
    ...fields,
    n: z
      .string()
      .regex(/^[1-4]$/)
      .nullable()
      .optional()
      .meta({ description: `Images to make, 1-${MAX_N} (default 1): one image task each` }),
    stream: z.literal('false').nullable().optional().meta({ description: 'Streaming is not supported' }),
    input_fidelity: z.enum(['high', 'low']).nullable().optional().meta({ description: 'Accepted and not passed on' }),
  })
  .strict()
  .meta({ id: 'ImageEditRequest' });

export const ImagesResponse = z
  .object({
    created: z.int().meta({ description: 'Unix seconds: when the first task was created' }),
    data: z.array(
      z.object({
        url: z.string().optional().meta({ description: 'response_format url: the image (no key needed to read it)' }),
        b64_json: z.string().optional().meta({ description: 'response_format b64_json: the image, base64' }),
      }),
    ),
  })
  .meta({ id: 'ImagesResponse' });

export const ImageTaskList = z
  .object({
    object: z.literal('list'),
    data: z.array(SubmitResponse).meta({ description: 'One image task per image asked for, in order; poll each' }),
  })
  .meta({ id: 'ImageTaskList' });

export const PreferAsyncHeader = {
  Prefer: z
    .string()
    .optional()
    .meta({
      description:
        '`respond-async` (RFC 7240): answer 202 at once with the image tasks to poll instead of waiting ' +
        'for the images. Other preferences are ignored.',
      example: 'respond-async',
    }),
};
