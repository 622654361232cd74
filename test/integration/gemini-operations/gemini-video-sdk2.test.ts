// Gemini long-running video operations through the unmodified @google/genai 2 (the last major whose
// `models.generateVideos` speaks the Gemini Developer API; 3 sends it to Vertex only, see
// gemini-video-operations.test.ts): generateVideos → getVideosOperation → files.download, all
// three SDK calls, against a real Kiln (Temporal, Redis, the local MP4 renderer).
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiError, GoogleGenAI } from 'google-genai-2';
import { expect, it } from 'vitest';
import { TINY_PNG } from '../providers/gemini/fake-gemini.js';
import { KEY_A, KEY_B } from '../../support/kiln.js';
import { useVideoKiln, type VideoKilnFile } from '../video/video-kiln.js';

let f: VideoKilnFile;
useVideoKiln((file) => (f = file));

const ai = (apiKey = KEY_A) => new GoogleGenAI({ apiKey, httpOptions: { baseUrl: f.kiln.baseUrl } });

it('generateVideos → getVideosOperation until done → files.download: the MP4 Kiln stored, the task in /v1/videos', async () => {
  const client = ai();
  let operation = await client.models.generateVideos({
    model: 'v-local',
    source: { prompt: 'a lighthouse at dusk' },
    config: { aspectRatio: '16:9', durationSeconds: 2, numberOfVideos: 1 },
  });
  const id = operation.name!.split('/operations/')[1]!;
  expect(operation.name).toBe(`models/v-local/operations/${id}`);
  for (let i = 0; i < 300 && !operation.done; i++) {
    await new Promise((r) => setTimeout(r, 100));
    operation = await client.operations.getVideosOperation({ operation });
  }
  expect(operation.done).toBe(true);
  expect(operation.error).toBeUndefined();
  const file = join(await mkdtemp(join(tmpdir(), 'kiln-genai2-')), 'video.mp4');
  await client.files.download({ file: operation.response!.generatedVideos![0]!, downloadPath: file });
  const bytes = await readFile(file);
  const video = (await f.calls.api()(`/v1/videos/${id}`)).json;
  expect(video).toMatchObject({ id, status: 'completed', seconds: '2', size: '320x180' });
  expect(bytes.equals(Buffer.from(await (await fetch(video.video_url)).arrayBuffer()))).toBe(true);

  // Another owner's operation: the SDK's ApiError with 404.
  const err = await ai(KEY_B)
    .operations.getVideosOperation({ operation })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).status).toBe(404);
});

it('an image and a duration the model does not allow: 400 from generateVideos itself, nothing started', async () => {
  const before = (await f.calls.api()('/v1/videos?limit=100')).json.data.length;
  const err = await ai()
    .models.generateVideos({
      model: 'v-local',
      source: { prompt: 'animate this', image: { imageBytes: TINY_PNG.toString('base64'), mimeType: 'image/png' } },
      config: { durationSeconds: 3 },
    })
    .catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).status).toBe(400);
  expect((err as ApiError).message).toMatch(/durationSeconds/);
  expect((await f.calls.api()('/v1/videos?limit=100')).json.data.length).toBe(before);
});
