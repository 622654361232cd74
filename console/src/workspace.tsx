// The signed-in workspace: one of the create forms, the live list and the gallery. Image tasks are
// listed by GET /v1/tasks and followed by batch-get; video tasks (which that list does not carry) are
// the ones made in this page, each followed by GET /v1/videos/{id}. Every poll obeys the server's
// guidance (next_poll_after_ms, Retry-After): never faster.
import { useEffect, useRef, useState } from 'preact/hooks';
import { AuthenticationError, KilnAPIError, type Kiln, type ModelInfo } from '../../src/client/index.js';
import { ImageForm } from './image-form.js';
import { fromBatchItem, fromListItem, fromVideo, newestFirst, type Row } from './rows.js';
import { Detail, Gallery, TaskList, type Opened } from './tasks.js';
import { ErrorBox, UNFINISHED, describeError, type ApiError } from './ui.js';
import { VideoForm } from './video-form.js';

const DEFAULT_POLL_MS = 10_000;
const PAGE = 20;

export type FormKind = 'image' | 'video' | 'node';

export function Workspace(props: {
  client: Kiln;
  form: FormKind;
  temporalUrl: string | null;
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
  const polling = useRef(false);
  // Videos: each has its own next allowed poll (its Retry-After) and at most one request in flight.
  const videoNext = useRef(new Map<string, number>());
  const [open, setOpen] = useState<Opened | null>(null);
  const [more, setMore] = useState(false);

  const fail = (err: unknown) => {
    if (err instanceof AuthenticationError) return onUnauthorized();
    setBanner(describeError(err));
  };
  const retryAfter = (err: unknown) =>
    err instanceof KilnAPIError && err.retryAfter !== undefined ? err.retryAfter * 1000 : 0;

  /** The newest page (sign-in, Refresh), or the next older one (`before` the oldest image row shown). */
  const loadList = async (older = false) => {
    try {
      const images = rowsRef.current.filter((r) => r.kind === 'image');
      const last = images[images.length - 1];
      const cursor = older && last ? { before_created_at: last.created_at, before_id: last.id } : {};
      const page = await client.tasks.listPage({ days: 3, limit: PAGE, ...cursor });
      setRows((prev) => {
        const known = new Map(prev.map((r) => [r.id, r]));
        const fresh = page.items.map((i) => fromListItem(i, known.get(i.id)));
        const rest = prev.filter((r) => !page.items.some((i) => i.id === r.id));
        return [...rest, ...fresh].sort(newestFirst);
      });
      if (!older || page.items.length < PAGE) setMore(page.items.length === PAGE);
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
    polling.current = true;
    try {
      const res = await client.tasks.batchGet(ids);
      pollMs.current = res.next_poll_after_ms || DEFAULT_POLL_MS;
      nextPollAt.current = Date.now() + pollMs.current;
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
      nextPollAt.current = Date.now() + Math.max(retryAfter(err), pollMs.current);
      fail(err);
    } finally {
      polling.current = false;
    }
  };

  const pollVideo = async (id: string) => {
    videoNext.current.set(id, Infinity);
    try {
      const v = await client.videos.retrieve(id);
      if (v.retryAfterMs) pollMs.current = v.retryAfterMs;
      videoNext.current.set(id, Date.now() + pollMs.current);
      setRows((prev) => prev.map((r) => (r.id === id ? fromVideo(v, r) : r)));
    } catch (err) {
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
    return () => clearInterval(tick);
  }, [client]);

  const submitted = (row: Row) => {
    setRows((prev) => [row, ...prev.filter((r) => r.id !== row.id)]);
    // The first check waits for the server's interval, like every later one.
    if (row.kind === 'video') videoNext.current.set(row.id, Date.now() + pollMs.current);
    else nextPollAt.current = Math.max(nextPollAt.current, Date.now() + pollMs.current);
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
      <TaskList rows={rows} onRefresh={() => loadList()} onMore={more ? () => loadList(true) : undefined} />
      <Gallery rows={rows} onOpen={setOpen} />
      {open && (
        <Detail
          row={rows.find((r) => r.id === open.id) ?? open.row}
          media={open.media}
          temporalUrl={props.temporalUrl}
          onClose={() => setOpen(null)}
        />
      )}
    </div>
  );
}
