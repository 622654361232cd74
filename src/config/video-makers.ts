// What each video provider can render, as the models file sees it: the `seconds` and `sizes` a
// model of it offers when the file lists none, and which of the listed ones it cannot send (the
// models file is then refused at start, naming the field). Every provider here takes no
// `nodeInfoList` (form workflow-node). Pure: the request mapping lives in src/shared/<provider>.ts.
import type { VideoProviderName } from './providers.js';
import { VEO_DEFAULT_SECONDS } from '../shared/veo.js';
import { DASHSCOPE_DEFAULT_SECONDS, dashscopeVideoRefusals } from '../shared/dashscope.js';
import { falVideoRefusals } from '../shared/fal.js';
import { KLING_DEFAULT_SECONDS, klingVideoRefusals } from '../shared/kling.js';
import { MINIMAX_DEFAULT_SECONDS, MINIMAX_DEFAULT_SIZES, minimaxVideoRefusals } from '../shared/minimax.js';
import { runwayDefaultSeconds, runwayVideoRefusals } from '../shared/runway.js';
import { SEEDANCE_DEFAULT_SECONDS, seedanceVideoRefusals } from '../shared/seedance.js';

/** A video model's options as the checks read them (src/config/models.ts, `videoOptions`). */
export interface VideoOffer {
  seconds: readonly string[];
  sizes: readonly string[];
  form: 'video' | 'workflow-node';
}

export interface VideoRefusal {
  field: string;
  message: string;
}

interface VideoMaker {
  /** The model's `seconds` when the file lists none; a function of the channel's `upstreamModel` where it differs by model. */
  seconds?: readonly string[] | ((upstreamModel: string | undefined) => readonly string[]);
  sizes?: readonly string[];
  /** What a channel of this provider (its `upstreamModel`) cannot send of the model's offer. */
  refusals?: (offer: VideoOffer, upstreamModel: string) => VideoRefusal[];
}

export const VIDEO_MAKERS: Partial<Record<VideoProviderName, VideoMaker>> = {
  // Veo's own checks are veoRefusals (src/shared/veo.ts), run with the model's resolved options.
  'gemini-veo': { seconds: VEO_DEFAULT_SECONDS },
  dashscope: {
    seconds: DASHSCOPE_DEFAULT_SECONDS,
    refusals: (o, model) => dashscopeVideoRefusals(o.sizes, model).map((message) => ({ field: 'sizes', message })),
  },
  fal: { refusals: (o) => falVideoRefusals(o) },
  minimax: {
    seconds: MINIMAX_DEFAULT_SECONDS,
    sizes: MINIMAX_DEFAULT_SIZES,
    refusals: (o, model) => minimaxVideoRefusals(o, model),
  },
  kling: { seconds: KLING_DEFAULT_SECONDS, refusals: (o) => klingVideoRefusals(o) },
  runway: { seconds: runwayDefaultSeconds, refusals: (o, model) => runwayVideoRefusals(o, model) },
  seedance: { seconds: SEEDANCE_DEFAULT_SECONDS, refusals: (o, model) => seedanceVideoRefusals(o, model) },
};

/** The default `seconds` of a model of `provider`, if the provider has its own. */
export function makerSeconds(provider: string, upstreamModel: string | undefined): readonly string[] | undefined {
  const s = VIDEO_MAKERS[provider as VideoProviderName]?.seconds;
  return typeof s === 'function' ? s(upstreamModel) : s;
}

/** Everything a channel of `provider` cannot send of the model's offer (none for providers not listed). */
export function videoMakerRefusals(provider: string, offer: VideoOffer, upstreamModel: string): VideoRefusal[] {
  const maker = VIDEO_MAKERS[provider as VideoProviderName];
  if (!maker?.refusals) return [];
  const form: VideoRefusal[] =
    offer.form === 'workflow-node'
      ? [{ field: 'form', message: `${provider} cannot take nodeInfoList (form workflow-node)` }]
      : [];
  return [...form, ...maker.refusals(offer, upstreamModel)];
}
