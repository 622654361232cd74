// Reading results by the contract's rules: images from candidates, chat text, video URLs.
import type { Candidate, ChatCompletion, Video } from './types.js';

export type ImageOutput =
  { kind: 'url'; url: string; mimeType?: string } | { kind: 'base64'; mimeType: string; data: Uint8Array };

/**
 * Images in `candidates[*].content.parts[*].inlineData`, in order: a part without inlineData is
 * skipped; a mimeType, when given, must start with `image/`; data starting with `http` is a URL,
 * anything else is base64 decoded by its mimeType. Task results may omit mimeType on URLs, so a URL
 * without one is kept; base64 without a mimeType cannot be typed and is skipped.
 */
export function imagesOf(result: { candidates?: Candidate[] | null } | null | undefined): ImageOutput[] {
  const out: ImageOutput[] = [];
  for (const c of result?.candidates ?? []) {
    for (const p of c?.content?.parts ?? []) {
      const d = p.inlineData;
      if (!d || typeof d.data !== 'string' || d.data === '') continue;
      if (d.mimeType !== undefined && !d.mimeType.startsWith('image/')) continue;
      if (d.data.startsWith('http'))
        out.push({ kind: 'url', url: d.data, ...(d.mimeType ? { mimeType: d.mimeType } : {}) });
      else if (d.mimeType) out.push({ kind: 'base64', mimeType: d.mimeType, data: fromBase64(d.data) });
    }
  }
  return out;
}

/** Image URLs only (a task result carries URLs). */
export function imageUrlsOf(result: { candidates?: Candidate[] | null } | null | undefined): string[] {
  return imagesOf(result).flatMap((i) => (i.kind === 'url' ? [i.url] : []));
}

/** `choices[0].message.content`: a string as is, or the `text` of its `type: text` items joined. */
export function chatTextOf(completion: ChatCompletion): string {
  const content = completion?.choices?.[0]?.message?.content;
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content
      .filter((i) => i?.type === 'text' && typeof i.text === 'string')
      .map((i) => i.text)
      .join('');
  return '';
}

/** Video URLs: `video_url`, else `data.video_url`, else every `results[*].url`. */
export function videoUrlsOf(video: Video): string[] {
  if (typeof video.video_url === 'string' && video.video_url) return [video.video_url];
  if (typeof video.data?.video_url === 'string' && video.data.video_url) return [video.data.video_url];
  return (video.results ?? []).map((r) => r?.url).filter((u): u is string => typeof u === 'string' && u !== '');
}

const EXT: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'video/mp4': 'mp4',
  'video/webm': 'webm',
  'video/quicktime': 'mov',
};

/** A file extension for a MIME type, falling back to the URL's own, then to `fallback`. */
export function extensionFor(mimeType: string | null | undefined, url: string | undefined, fallback: string): string {
  const mt = mimeType?.split(';')[0].trim().toLowerCase();
  if (mt && EXT[mt]) return EXT[mt];
  const m = url ? /\.([a-z0-9]{2,5})(?:$|[?#])/i.exec(new URL(url, 'http://x').pathname) : null;
  return m ? m[1].toLowerCase() : fallback;
}

/** The MIME type of an image file by its extension (for chat data URIs). */
export function imageMimeOf(fileName: string): string | undefined {
  const ext = fileName.toLowerCase().split('.').pop();
  return { png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', webp: 'image/webp', gif: 'image/gif' }[ext ?? ''];
}

/** `data:image/<subtype>;base64,<BASE64_IMAGE>`, the form chat image items need. */
export function dataUri(mimeType: string, bytes: Uint8Array): string {
  return `data:${mimeType};base64,${toBase64(bytes)}`;
}

// atob/btoa rather than Buffer: the client runs in browsers too (no Node built-ins or globals).
function fromBase64(b64: string): Uint8Array {
  const bin = atob(b64.replace(/\s/g, '').replace(/-/g, '+').replace(/_/g, '/'));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function toBase64(bytes: Uint8Array): string {
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}
