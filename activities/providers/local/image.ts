// The embedded image provider: no network, a real PNG that shows the prompt.
import { randomUUID } from 'node:crypto';
import type { BlobStore } from '../../../src/blobs/local.js';
import { abortableSleep } from '../../../src/shared/abortable-sleep.js';
import type { GenerationResult } from '../../../src/shared/image-task.js';
import { promptText } from '../../../src/shared/prompt.js';
import type { ImageCall, ImageCallProvider } from '../contract.js';

export class LocalImageProvider implements ImageCallProvider {
  constructor(private readonly blobs: BlobStore) {}

  async generate({ input, model, signal, dispatching }: ImageCall): Promise<GenerationResult> {
    await dispatching();
    await abortableSleep(model.latencyMs, signal);
    const cfg = input.request.generationConfig?.imageConfig;
    // Loaded on first use: jimp and its fonts take tens of MiB a worker without local models never needs.
    const { renderPromptPng } = await import('./render-png.js');
    const png = await renderPromptPng({
      prompt: promptText(input.request),
      aspectRatio: cfg?.aspectRatio,
      imageSize: cfg?.imageSize,
    });
    signal.throwIfAborted();
    const url = await this.blobs.put(png, 'image/png');
    return {
      response_id: `local-${randomUUID()}`,
      model_version: `${model.id}-local-1`,
      candidates: [
        {
          content: { role: 'model', parts: [{ inlineData: { mimeType: 'image/png', data: url } }] },
          finishReason: 'STOP',
          index: 0,
        },
      ],
    };
  }
}
