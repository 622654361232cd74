// Prompt helpers shared by validation and providers. Pure.
import type { ImageRequest } from './image-task.js';

/** All text parts of the user contents, joined: the prompt as a person wrote it. */
export function promptText(req: Pick<ImageRequest, 'contents'>): string {
  return req.contents
    .flatMap((c) => c.parts.map((p) => p.text ?? ''))
    .filter(Boolean)
    .join('\n');
}

/** Reference images of a request: every inlineData part of the contents. */
export function referenceImages(req: Pick<ImageRequest, 'contents'>) {
  return req.contents.flatMap((c) => c.parts.filter((p) => p.inlineData !== undefined).map((p) => p.inlineData!));
}
