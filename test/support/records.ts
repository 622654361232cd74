// Task records written straight into the read model by tests that check how it is read.
import { randomBytes } from 'node:crypto';
import type { ImageTaskInput, ImageTaskRecord } from '../../src/shared/image-task.js';
import type { VideoTaskRecord } from '../../src/shared/video-task.js';

export const nowSeconds = () => Math.floor(Date.now() / 1000);

/** An image task record of `owner` in `status`, created now; `over` replaces any field. */
export const imageRecord = (
  owner: string,
  status: ImageTaskRecord['status'],
  over: Partial<ImageTaskRecord> = {},
): ImageTaskRecord => ({
  id: `task_${randomBytes(16).toString('hex')}`,
  kind: 'image',
  owner,
  model: 'kiln-image-1',
  status,
  created_at: nowSeconds(),
  finished_at: null,
  candidates: null,
  error: null,
  ...over,
});

/** The same task, succeeded with one image. */
export const succeededRecord = (r: ImageTaskRecord): ImageTaskRecord => ({
  ...r,
  status: 'succeeded',
  finished_at: nowSeconds(),
  response_id: 'r1',
  model_version: 'v1',
  candidates: [
    {
      content: {
        role: 'model',
        parts: [{ inlineData: { mimeType: 'image/png', data: 'https://files.example/a.png' } }],
      },
      finishReason: 'STOP',
      index: 0,
    },
  ],
});

let inputs = 0;
/** A workflow input for an image task of `model`, with a fresh sequential id (unit tests). */
export const imageTaskInput = (model: string): ImageTaskInput => ({
  id: `task_${String(++inputs).padStart(32, '0')}`,
  owner: 'o1',
  model,
  created_at: 1_700_000_000,
  request: { contents: [{ parts: [{ text: 'hi' }] }] },
});

/** A running video task record of `owner`, created now; `over` replaces any field. */
export const videoRecord = (owner: string, over: Partial<VideoTaskRecord> = {}): VideoTaskRecord => ({
  id: `video_${randomBytes(16).toString('hex')}`,
  kind: 'video',
  owner,
  model: 'kiln-video-1',
  status: 'running',
  progress: 40,
  prompt: 'a paper boat',
  seconds: '4',
  size: '720x1280',
  created_at: nowSeconds(),
  completed_at: null,
  error: null,
  ...over,
});
