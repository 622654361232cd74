// Reads a generateContent answer by the contract's parsing rules:
//   (1) a part without inlineData is skipped for images (text parts are kept, in order);
//   (2) inlineData.mimeType must start with `image/`;
//   (3) data starting with `http` is an image URL, passed through;
//   (4) otherwise data is base64, decoded as mimeType says, stored, and replaced by its URL.
import type { BlobStore } from '../../../src/blobs/local.js';
import type { Candidate, Part } from '../../../src/shared/image-task.js';
import { UpstreamFailure } from '../../../src/upstreams/failures.js';

interface UpstreamPart {
  text?: unknown;
  thought?: unknown;
  inlineData?: { mimeType?: unknown; data?: unknown };
}

export interface GeminiResponse {
  responseId?: unknown;
  modelVersion?: unknown;
  candidates?: { content?: { parts?: UpstreamPart[] }; finishReason?: unknown; index?: unknown }[];
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export interface ParsedResult {
  response_id?: string;
  model_version?: string;
  candidates: Candidate[];
}

export async function parseGeminiResult(body: GeminiResponse, blobs: BlobStore): Promise<ParsedResult> {
  const raw = Array.isArray(body?.candidates) ? body.candidates : [];
  const candidates: Candidate[] = [];
  for (const [i, c] of raw.entries()) {
    const parts: Part[] = [];
    for (const p of Array.isArray(c?.content?.parts) ? c.content.parts : []) {
      // Thinking models send drafts marked `thought`; they are not the answer.
      if (!p || typeof p !== 'object' || p.thought === true) continue;
      if (typeof p.text === 'string') parts.push({ text: p.text });
      const image = await readImage(p.inlineData, blobs);
      if (image) parts.push({ inlineData: image });
    }
    candidates.push({
      content: { role: 'model', parts },
      finishReason: typeof c?.finishReason === 'string' ? c.finishReason : 'STOP',
      index: typeof c?.index === 'number' ? c.index : i,
    });
  }
  if (!candidates.some((c) => c.content.parts.some((p) => p.inlineData))) {
    throw new UpstreamFailure('upstream_error', 'upstream answered without an image');
  }
  return {
    ...(typeof body.responseId === 'string' && body.responseId ? { response_id: body.responseId } : {}),
    ...(typeof body.modelVersion === 'string' && body.modelVersion ? { model_version: body.modelVersion } : {}),
    candidates,
  };
}

async function readImage(
  d: UpstreamPart['inlineData'],
  blobs: BlobStore,
): Promise<{ mimeType: string; data: string } | null> {
  if (!d || typeof d !== 'object') return null; // rule 1
  const { mimeType, data } = d;
  if (typeof mimeType !== 'string' || !mimeType.startsWith('image/')) return null; // rule 2
  if (typeof data !== 'string' || data === '') return null;
  if (data.startsWith('http')) return { mimeType, data }; // rule 3
  const compact = data.replace(/\s+/g, '').replace(/-/g, '+').replace(/_/g, '/'); // rule 4 (url-safe alphabet too)
  if (!BASE64.test(compact)) return null;
  const bytes = Buffer.from(compact, 'base64');
  if (bytes.length === 0) return null;
  return { mimeType, data: await blobs.put(bytes, mimeType) };
}
