// Submit-time checks of what a video model's providers can express where it depends on the request
// (an image for a text-to-video model, a duration a resolution does not render): refused with 400,
// naming the field and the values it takes, before a workflow exists. What depends only on the
// models file is refused at start-up (src/config/models.ts).
import type { VideoModel } from '../config/models.js';
import { videoOptions } from '../config/models.js';
import type { VideoProviderName } from '../config/providers.js';
import { KilnError } from '../shared/errors.js';
import { minimaxVideoBody, type MinimaxRefusal } from '../shared/minimax.js';
import type { VideoRequest } from '../shared/video-task.js';
import { runwayVideoTask } from '../shared/runway.js';

type VideoOptionCheck = (request: VideoRequest, model: VideoModel) => MinimaxRefusal | null;

const CHECKS: Partial<Record<VideoProviderName, VideoOptionCheck>> = {
  // Each minimax channel's upstream model decides what it takes (its resolutions, durations, image).
  minimax: (request, model) => {
    for (const c of model.channels) {
      if (c.provider !== 'minimax') continue;
      const r = minimaxVideoBody(
        request,
        c.upstreamModel ?? model.upstreamModel ?? model.id,
        videoOptions(model).sizes,
      );
      if ('refusal' in r) return r.refusal;
    }
    return null;
  },
  // Each runway channel's model decides whether it needs (or takes) an image and how long a prompt may be.
  runway: (request, model) => {
    for (const c of model.channels) {
      if (c.provider !== 'runway') continue;
      const r = runwayVideoTask(request, c.upstreamModel ?? model.id);
      if ('refusal' in r) return r.refusal;
    }
    return null;
  },
};

/** Throws invalid_request when any channel's provider cannot express `request`. */
export function refuseInexpressibleVideo(request: VideoRequest, model: VideoModel): void {
  for (const provider of new Set(model.channels.map((c) => c.provider))) {
    const r = CHECKS[provider]?.(request, model);
    if (r)
      throw new KilnError(
        'invalid_request',
        `${r.field} "${r.got.slice(0, 60)}" cannot be sent to model ${model.id} (provider ${provider}); ` +
          `allowed: ${r.allowed.join(', ')}.`,
      );
  }
}
