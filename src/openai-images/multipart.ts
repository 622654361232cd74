// The body of POST /v1/images/edits: multipart/form-data as the OpenAI SDK sends it (`image`, or
// `image[]` for several files, beside text fields). It is read whole, within a byte limit, and its
// parts are counted before any parsing, so a hostile form costs at most that limit and one scan.
import type { Context } from 'koa';
import { rawBody } from '../http/body.js';
import { KilnError } from '../shared/errors.js';
import { LIMITS } from '../shared/limits.js';
import { ParamError, unsupportedFile } from './params.js';

export const EDIT_LIMITS = {
  /** The contract's limit of reference images on a task. */
  images: LIMITS.referenceImages,
  /** One image file, in bytes. */
  fileBytes: 1_000_000,
  /**
   * The whole body after decompression. The images travel to the worker as base64 (4/3 of their
   * size) inside the task's request, which must fit one Temporal payload (LIMITS.requestBytes).
   */
  bodyBytes: 1_500_000,
  /** Parts of the form, files and text fields together. */
  parts: 32,
} as const;

/** Media types of reference images Kiln passes on, told by their first bytes. */
export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'image/gif'] as const;

export interface Upload {
  mimeType: (typeof IMAGE_TYPES)[number];
  data: Buffer;
}

export interface EditForm {
  fields: Record<string, string>;
  images: Upload[];
}

/** What the bytes are, whatever the part's Content-Type claims. */
export function sniffImage(b: Buffer): Upload['mimeType'] | null {
  if (b.length >= 8 && b.readUInt32BE(0) === 0x89504e47 && b.readUInt32BE(4) === 0x0d0a1a0a) return 'image/png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP')
    return 'image/webp';
  if (b.length >= 6 && /^GIF8[79]a$/.test(b.toString('latin1', 0, 6))) return 'image/gif';
  return null;
}

const malformed = () => new KilnError('invalid_request', 'The multipart/form-data body is malformed.');

/** The form's parts: its delimiters less the closing one (each is CRLF, `--` and the boundary). */
export function countParts(raw: Buffer, boundary: string): number {
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let n = raw.subarray(0, delimiter.length - 2).equals(delimiter.subarray(2)) ? 1 : 0;
  for (let at = raw.indexOf(delimiter); at >= 0; at = raw.indexOf(delimiter, at + delimiter.length)) n++;
  return Math.max(0, n - 1);
}

function boundaryOf(contentType: string): string | null {
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  return m ? (m[1] ?? m[2]!) : null;
}

/** Reads and checks the form: limits, then every image file's bytes. */
export async function readEditForm(ctx: Context): Promise<EditForm> {
  if (!ctx.is('multipart/form-data'))
    throw new KilnError(
      'unsupported_media_type',
      'Send the body as multipart/form-data (image files and text fields), as the OpenAI SDK does.',
    );
  let raw: Buffer;
  try {
    raw = await rawBody(ctx, EDIT_LIMITS.bodyBytes);
  } catch (err) {
    if ((err as { status?: unknown }).status !== 413) throw err;
    throw new KilnError(
      'request_too_large',
      `The request body is larger than ${EDIT_LIMITS.bodyBytes} bytes after decompression ` +
        `(at most ${EDIT_LIMITS.fileBytes} bytes per image file).`,
    );
  }
  const contentType = ctx.get('content-type');
  const boundary = boundaryOf(contentType);
  if (!boundary) throw malformed();
  const parts = countParts(raw, boundary);
  if (parts > EDIT_LIMITS.parts)
    throw new KilnError('invalid_request', `The form has ${parts} parts; at most ${EDIT_LIMITS.parts} are accepted.`);
  let form: FormData;
  try {
    form = await new Response(new Uint8Array(raw), { headers: { 'content-type': contentType } }).formData();
  } catch {
    throw malformed();
  }
  // No prototype: a field named `__proto__` or `toString` is just an unknown field.
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  const files: File[] = [];
  for (const [name, value] of form) {
    if (name === 'image' || name === 'image[]') {
      if (typeof value === 'string')
        throw new ParamError('invalid_request', 'image must be sent as a file, not as a text field.', 'image');
      files.push(value);
    } else if (typeof value !== 'string') {
      throw unsupportedFile(name);
    } else if (Object.hasOwn(fields, name)) {
      throw new ParamError('invalid_request', `${name} is given twice; send it once.`, name);
    } else fields[name] = value;
  }
  return { fields, images: await checkImages(files) };
}

async function checkImages(files: File[]): Promise<Upload[]> {
  if (files.length === 0)
    throw new ParamError(
      'invalid_request',
      `image is required: 1 to ${EDIT_LIMITS.images} image files (image, or image[] for several).`,
      'image',
    );
  if (files.length > EDIT_LIMITS.images)
    throw new ParamError(
      'too_many_reference_images',
      `${files.length} images were sent; at most ${EDIT_LIMITS.images} are allowed.`,
      'image',
    );
  const out: Upload[] = [];
  for (const [i, f] of files.entries()) {
    const which = `Image ${i + 1} of ${files.length}`;
    if (f.size > EDIT_LIMITS.fileBytes)
      throw new ParamError(
        'image_too_large',
        `${which} has ${f.size} bytes; at most ${EDIT_LIMITS.fileBytes} are allowed per file.`,
        'image',
      );
    const declared = f.type.split(';')[0]!.trim().toLowerCase();
    if (declared && !declared.startsWith('image/') && declared !== 'application/octet-stream')
      throw new ParamError(
        'invalid_request',
        `${which} is sent as ${declared.slice(0, 60)}; only image files (PNG, JPEG, WebP, GIF) are accepted.`,
        'image',
      );
    const data = Buffer.from(await f.arrayBuffer());
    const mimeType = sniffImage(data);
    if (!mimeType) throw new ParamError('invalid_request', `${which} is not a PNG, JPEG, WebP or GIF image.`, 'image');
    out.push({ mimeType, data });
  }
  return out;
}
