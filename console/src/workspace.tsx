// The signed-in workspace: one of the create forms, the live list and the gallery. Image tasks are
// listed by GET /v1/tasks and followed by batch-get; video tasks are listed by GET /v1/videos and
// each followed by GET /v1/videos/{id}; the two lists merge by created_at. Polls are long-polls
// (the wait API): an answer with Preference-Applied may be followed at once, one without it puts
// the task back on the server's schedule (next_poll_after_ms, Retry-After): never faster.
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  AuthenticationError,
  KilnAPIError,
  RateLimitedError,
  type Kiln,
  type ModelInfo,
} from '../../src/client/index.js';
import { ImageForm } from './image-form.js';
import { fromBatchItem, fromListItem, fromVideo, newestFirst, type Row } from './rows.js';
import { Detail, Gallery, TaskList, type Opened } from './tasks.js';
import { ErrorBox, UNFINISHED, describeError, type ApiError } from './ui.js';
import { VideoForm } from './video-form.js';

const DEFAULT_POLL_MS = 10_000;
const PAGE = 20;
/** Seconds a poll asks the server to hold it until something changes (1-60). */
const WAIT_SECONDS = 25;

export type FormKind = 'image' | 'video' | 'node';

export function Workspace(props: {
  client: Kiln;
  form: FormKind;
  temporalUrl: string | null;
  /** PUBLIC_BASE_URL: its /v1/files URLs load through this page's origin. */
  publicBaseUrl: string | null;
  onUnauthorized: () => void;
}) {
  const { client, onUnauthorized } = props;
  const [models, setModels] = useState<ModelInfo[]>([]);
  const [rows, setRows] = useState<Row[]>([]);
  const [banner, setBanner] = useState<ApiError | null>(null);
  const rowsRef = useRef(rows);
  rowsRef.current = rows;
  // The server's polling guidance: the next batch-get no sooner than this (next_poll_after_ms, Retry-After).
  const nextPollAt = useRef(0);
  const pollMs = useRef(DEFAULT_POLL_MS);
  // The batch long-poll in flight, if any: a new image task ends it, so the next one includes it.
  const polling = useRef<AbortController | null>(null);
  // Videos: each has its own next allowed poll (its Retry-After) and at most one request in flight.
  const videoNext = useRef(new Map<string, number>());
  // Ends the video long-polls in flight when the workspace goes (sign-out).
  const videoStop = useRef(new AbortController());
  const [open, setOpen] = useState<Opened | null>(null);
  // Older pages: images by their (created_at, id) cursor, videos after the last video listed.
  const [more, setMore] = useState({ images: false, videos: false });
  const videoCursor = useRef<string | null>(null);

  const fail = (err: unknown) => {
    if (err instanceof AuthenticationError) return onUnauthorized();
    // A poll refused by the limiter is simply asked again after its Retry-After: nothing to tell.
    if (err instanceof RateLimitedError) return;
    setBanner(describeError(err));
  };
  const retryAfter = (err: unknown) =>
    err instanceof KilnAPIError && err.retryAfter !== undefined ? err.retryAfter * 1000 : 0;

  /** The newest pages (sign-in, Refresh), or the next older ones of the lists that have more. */
  const loadList = async (older = false) => {
    try {
      const images = rowsRef.current.filter((r) => r.kind === 'image');
      const last = images[images.length - 1];
      const cursor = older && last ? { before_created_at: last.created_at, before_id: last.id } : {};
      const after = older ? videoCursor.current : null;
      const [page, videos] = await Promise.all([
        older && !more.images ? null : client.tasks.listPage({ days: 3, limit: PAGE, ...cursor }),
        older && (!more.videos || !after) ? null : client.videos.listPage({ limit: PAGE, ...(after ? { after } : {}) }),
      ]);
      setRows((prev) => {
        const known = new Map(prev.map((r) => [r.id, r]));
        const fresh = [
          ...(page?.items ?? []).map((i) => fromListItem(i, known.get(i.id))),
          ...(videos?.data ?? []).map((v) => fromVideo(v, known.get(v.id))),
        ];
        const ids = new Set(fresh.map((r) => r.id));
        return [...prev.filter((r) => !ids.has(r.id)), ...fresh].sort(newestFirst);
      });
      if (videos?.last_id) videoCursor.current = videos.last_id;
      setMore((m) => ({
        images: page ? page.items.length === PAGE : m.images,
        videos: videos ? videos.has_more : m.videos,
      }));
      nextPollAt.current = 0;
      setBanner(null);
    } catch (err) {
      fail(err);
    }
  };

  const pollImages = async () => {
    if (polling.current || Date.now() < nextPollAt.current) return;
    const ids = rowsRef.current
      .filter((r) => r.kind === 'image' && (UNFINISHED.includes(r.status) || !r.loaded))
      .map((r) => r.id)
      .slice(0, 100);
    if (ids.length === 0) return;
    const ctl = new AbortController();
    polling.current = ctl;
    try {
      const res = await client.tasks.batchGet(ids, { wait: WAIT_SECONDS, signal: ctl.signal });
      pollMs.current = res.next_poll_after_ms || DEFAULT_POLL_MS;
      // A held answer came at the first change (or after the wait): the next long-poll may follow.
      nextPollAt.current = res.waited ? 0 : Date.now() + pollMs.current;
      setRows((prev) =>
        prev.flatMap((r) => {
          const it = res.items.find((i) => i.id === r.id);
          if (!it) return [r];
          const next = fromBatchItem(r, it);
          return next ? [next] : [];
        }),
      );
      setBanner(null);
    } catch (err) {
      if (ctl.signal.aborted) return;
      nextPollAt.current = Date.now() + Math.max(retryAfter(err), pollMs.current);
      fail(err);
    } finally {
      if (polling.current === ctl) polling.current = null;
    }
  };

  const pollVideo = async (id: string) => {
    videoNext.current.set(id, Infinity);
    const signal = videoStop.current.signal;
    try {
      const v = await client.videos.retrieve(id, { wait: WAIT_SECONDS, signal });
      if (v.retryAfterMs) pollMs.current = v.retryAfterMs;
      videoNext.current.set(id, v.waited ? 0 : Date.now() + pollMs.current);
      setRows((prev) => prev.map((r) => (r.id === id ? fromVideo(v, r) : r)));
    } catch (err) {
      if (signal.aborted) return;
      videoNext.current.set(id, Date.now() + Math.max(retryAfter(err), pollMs.current));
      fail(err);
    }
  };

  useEffect(() => {
    void loadList();
    client.models().then(setModels).catch(fail);
    // A cheap local tick; a request goes out only when some task needs it and the guidance allows.
    const tick = setInterval(() => {
      void pollImages();
      const now = Date.now();
      for (const r of rowsRef.current)
        if (r.kind === 'video' && (UNFINISHED.includes(r.status) || !r.loaded))
          if ((videoNext.current.get(r.id) ?? 0) <= now) void pollVideo(r.id);
    }, 250);
    return () => {
      clearInterval(tick);
      polling.current?.abort();
      videoStop.current.abort();
      videoStop.current = new AbortController();
      videoNext.current.clear();
    };
  }, [client]);

  const submitted = (row: Row) => {
    setRows((prev) => [row, ...prev.filter((r) => r.id !== row.id)]);
    // The first check is a long-poll at once (it returns at the first change). A batch long-poll
    // in flight does not carry the new id: it is ended, and the next tick asks again with it,
    // unless the server's schedule says to wait (the next tick obeys nextPollAt).
    if (row.kind === 'video') videoNext.current.set(row.id, 0);
    else if (polling.current) {
      rowsRef.current = [row, ...rowsRef.current.filter((r) => r.id !== row.id)];
      polling.current.abort();
      polling.current = null;
    }
  };

  const formProps = { client, models, onSubmitted: submitted, onUnauthorized };
  return (
    <div class="workspace">
      {props.form === 'image' ? (
        <ImageForm {...formProps} />
      ) : (
        <VideoForm key={props.form} mode={props.form} {...formProps} />
      )}
      <ErrorBox error={banner} />
      <TaskList
        rows={rows}
        onRefresh={() => loadList()}
        onMore={more.images || more.videos ? () => loadList(true) : undefined}
      />
      <Gallery rows={rows} publicBaseUrl={props.publicBaseUrl} onOpen={setOpen} />
      {open && (
        <Detail
          row={rows.find((r) => r.id === open.id) ?? open.row}
          media={open.media}
          temporalUrl={props.temporalUrl}
          publicBaseUrl={props.publicBaseUrl}
          onClose={() => setOpen(null)}
        />
      )}
    </div>
  );
}
