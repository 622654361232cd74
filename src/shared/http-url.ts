// The one check of a caller's media URL (reference images of image and video tasks).
// Pure module: safe to value-import from workflow code.
import { KilnError } from './errors.js';

/**
 * Throws unless `data` is an absolute http(s) URL. `field` names the value in the caller's request;
 * `where` (when the field repeats, as reference images do) says which one.
 */
export function checkHttpUrl(data: string | undefined, field: string, where?: string): void {
  const lead = where ? `${where}: ${field}` : field;
  if (!data || data.trim() === '')
    throw new KilnError('invalid_reference_image_url', `${lead} must be an absolute http(s) URL; it is empty.`);
  let url: URL;
  try {
    url = new URL(data);
  } catch {
    throw new KilnError('invalid_reference_image_url', `${lead} must be an absolute http(s) URL.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new KilnError(
      'invalid_reference_image_scheme',
      `${where ?? field}: the URL scheme must be http or https, not ${url.protocol.replace(/:$/, '')}.`,
    );
  }
}
