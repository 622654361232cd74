// Kiln client: `import { Kiln } from 'kiln/client'` (see README, "Client and CLI").
import { KilnCore, type ClientOptions } from './core.js';
import { Chat } from './chat.js';
import { Tasks } from './tasks.js';
import { Videos } from './videos.js';
import { Webhooks } from './webhooks.js';

export class Kiln extends KilnCore {
  readonly tasks: Tasks;
  readonly chat: Chat;
  readonly videos: Videos;
  readonly webhooks: Webhooks;

  constructor(opts: ClientOptions = {}) {
    super(opts);
    this.tasks = new Tasks(this);
    this.chat = new Chat(this);
    this.videos = new Videos(this);
    this.webhooks = new Webhooks(this);
  }

  /**
   * `GET /v1/models`: the configured models with their `kind` (image, chat, video), `form`, and the values
   * each accepts (`image_sizes`; video `seconds` and `sizes`, the first being the default).
   */
  async models(opts: { signal?: AbortSignal } = {}): Promise<ModelInfo[]> {
    return (await this.request<{ data: { id: string; kind?: string }[] }>('GET', '/v1/models', { signal: opts.signal }))
      .data.data;
  }

  /** Downloads a result URL (the API key goes along only to this Kiln's own origin). */
  async download(
    url: string,
    opts: { signal?: AbortSignal } = {},
  ): Promise<{ bytes: Uint8Array; contentType: string | null }> {
    const res = await this.fetchUrl(url, opts.signal);
    return { bytes: new Uint8Array(await res.arrayBuffer()), contentType: res.headers.get('content-type') };
  }
}

export interface ModelInfo {
  id: string;
  kind?: string;
  form?: string;
  description?: string | null;
  image_sizes?: string[];
  seconds?: string[];
  sizes?: string[];
}

export default Kiln;
export type { ClientOptions, RequestOptions } from './core.js';
export { newIdempotencyKey } from './core.js';
export * from './errors.js';
export * from './results.js';
export * from './types.js';
export { DEFAULT_POLLING, chunk, realClock, type Clock, type PollingOptions, type PollProgress } from './polling.js';
export {
  buildImageRequest,
  isUnfinished,
  type ImageCreateParams,
  type ListParams,
  type SubmitOptions,
  type WaitOptions,
} from './tasks.js';
export { systemMessage, userMessage, streamText, type UserMessageInput } from './chat.js';
export { UNFINISHED_VIDEO_STATUSES, type VideoListPage, type VideoListParams } from './videos.js';
export { verifyWebhook, WebhookVerificationError, type VerifyWebhookOptions, type WebhookSecret } from './webhooks.js';
export { Tasks, Chat, Videos, Webhooks };
