// Real images for chat tests, made with jimp, and data URIs of them.
import { Jimp } from 'jimp';

export async function png(width: number, height: number): Promise<Buffer> {
  return new Jimp({ width, height, color: 0x3366ccff }).getBuffer('image/png');
}

export async function jpeg(width: number, height: number): Promise<Buffer> {
  return new Jimp({ width, height, color: 0xcc6633ff }).getBuffer('image/jpeg');
}

/** A PNG padded with trailing bytes (readers ignore them) to exactly `bytes` bytes. */
export async function pngOfSize(bytes: number): Promise<Buffer> {
  const b = await png(2, 2);
  if (b.length > bytes) throw new Error(`a 2×2 PNG already has ${b.length} bytes`);
  return Buffer.concat([b, Buffer.alloc(bytes - b.length)]);
}

export const dataUri = (b: Buffer, subtype = 'png') => `data:image/${subtype};base64,${b.toString('base64')}`;

export const imageItem = (url: string) => ({ type: 'image_url' as const, image_url: { url } });
export const textItem = (text: string) => ({ type: 'text' as const, text });
