// One line of the live list, for an image task or a video task, and how API answers become one.
import {
  imageUrlsOf,
  videoUrlsOf,
  type BatchItem,
  type TaskListItem,
  type TaskStatus,
  type Video,
} from '../../src/client/index.js';
import type { ApiError } from './ui.js';

export interface Media {
  url: string;
  type: 'image' | 'video';
}

export interface Row {
  id: string;
  kind: 'image' | 'video';
  model: string;
  status: TaskStatus;
  created_at: number;
  finished_at?: number | null;
  prompt?: string;
  error?: ApiError | null;
  uncertain_reason?: string;
  media: Media[];
  /** Details (results, error) fetched: list items do not carry them. */
  loaded: boolean;
  /** Videos: 0-100, and what was asked for. */
  progress?: number;
  seconds?: string;
  size?: string;
}

/** The video API's statuses in the image tasks' words, so one set of chips serves both. */
const VIDEO_STATUS: Record<string, TaskStatus> = {
  queued: 'queued',
  in_progress: 'running',
  completed: 'succeeded',
  failed: 'failed',
  uncertain: 'uncertain',
};

const IMAGE_FILE = /\.(png|jpe?g|webp|gif|avif)(\?|$)/i;

export function fromVideo(v: Video, prev?: Row): Row {
  const status = VIDEO_STATUS[v.status] ?? 'queued';
  const types = new Map(
    ((v.results ?? []) as { url: string; file_type?: string }[]).map((r) => [r.url, r.file_type ?? '']),
  );
  return {
    id: v.id,
    kind: 'video',
    model: v.model ?? prev?.model ?? '',
    status,
    created_at: v.created_at ?? prev?.created_at ?? Math.floor(Date.now() / 1000),
    finished_at: v.completed_at ?? null,
    prompt: typeof v.prompt === 'string' && v.prompt ? v.prompt : prev?.prompt,
    error: v.error ? { code: v.error.code, message: v.error.message } : null,
    uncertain_reason: typeof v.uncertain_reason === 'string' ? v.uncertain_reason : undefined,
    media:
      status === 'succeeded'
        ? videoUrlsOf(v).map((url) => ({
            url,
            type: (types.get(url) ?? '').startsWith('image') || IMAGE_FILE.test(url) ? 'image' : 'video',
          }))
        : [],
    loaded: true,
    progress: v.progress,
    seconds: v.seconds,
    size: v.size,
  };
}

export function fromBatchItem(r: Row, it: BatchItem): Row | null {
  if (it.status === 'not_found') return null;
  return {
    ...r,
    status: it.status,
    model: it.model ?? r.model,
    finished_at: it.finished_at ?? r.finished_at,
    error: it.error ? { code: it.error.code, message: it.error.message } : null,
    uncertain_reason: it.uncertain_reason,
    media: imageUrlsOf(it).map((url) => ({ url, type: 'image' as const })),
    loaded: true,
  };
}

export function fromListItem(i: TaskListItem, prev?: Row): Row {
  if (prev && prev.status === i.status) return prev;
  return { ...i, kind: 'image', prompt: prev?.prompt, media: [], loaded: false };
}

/**
 * Where the page loads a result from: this Kiln's own files (`${publicBaseUrl}/v1/files/…`, absolute
 * for API clients) through the page's origin, which reaches this Kiln even where PUBLIC_BASE_URL does
 * not (another name or IP, a reverse proxy) and which the CSP allows; other URLs (S3) as they are.
 */
export function pageUrl(url: string, publicBaseUrl: string | null): string {
  const files = publicBaseUrl ? `${publicBaseUrl}/v1/files/` : null;
  return files && url.startsWith(files) ? `/v1/files/${url.slice(files.length)}` : url;
}

/** Newest first; ties by id, as the API orders its list. */
export const newestFirst = (a: Row, b: Row) => b.created_at - a.created_at || (b.id < a.id ? -1 : 1);
