// The models Kiln serves without a models file: all local and offline, so a fresh clone generates
// real images, chat replies and videos.
import { parseModel, type Model } from './models.js';

export const DEFAULT_MODELS: Model[] = [
  parseModel({
    id: 'kiln-image-1',
    kind: 'image',
    provider: 'local',
    description: 'Built-in local renderer: a PNG that shows the prompt',
    idempotent: true,
  }),
  parseModel({
    id: 'kiln-chat-1',
    kind: 'chat',
    provider: 'local',
    description: 'Built-in local chat model: a deterministic reply that describes its inputs',
  }),
  ...[
    {
      id: 'kiln-video-1',
      description: 'Built-in local renderer: a short H.264 MP4 that shows the prompt',
      seconds: ['4', '8', '10', '12'],
    },
    {
      id: 'kiln-video-pro',
      description: "Built-in local renderer with the pro model's strict seconds and sizes",
      strict: true,
    },
    {
      id: 'kiln-video-node',
      description: 'Built-in local renderer answering in the workflow-node form (results[*].url)',
      form: 'workflow-node',
    },
  ].map((m) =>
    parseModel({
      kind: 'video',
      provider: 'local',
      idempotent: true,
      latencyMs: 2000,
      pollIntervalMs: 1000,
      ...m,
    }),
  ),
];
