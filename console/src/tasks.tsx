// Watch and browse: the live list of recent tasks (images and videos), the gallery of finished
// results (lazy images, inline videos) and a result's full view.
import { useEffect, useRef, useState } from 'preact/hooks';
import { pageUrl, type Media, type Row } from './rows.js';
import { ErrorBox, StatusChip, UNFINISHED, elapsed, useNow } from './ui.js';

export function TaskList({ rows, onRefresh, onMore }: { rows: Row[]; onRefresh: () => void; onMore?: () => void }) {
  const now = useNow(rows.some((r) => UNFINISHED.includes(r.status)));
  return (
    <section class="card tasks" aria-labelledby="tasks-title">
      <div class="section-head">
        <h2 id="tasks-title">Recent tasks</h2>
        <button type="button" class="secondary" onClick={onRefresh}>
          Refresh
        </button>
      </div>
      {rows.length === 0 ? (
        <p class="empty">No tasks in the last 3 days.</p>
      ) : (
        <ul class="task-list" aria-live="polite">
          {rows.map((r) => (
            <li key={r.id} class="task" data-task-id={r.id} data-status={r.status} data-kind={r.kind}>
              <div class="task-head">
                <StatusChip status={r.status} />
                {UNFINISHED.includes(r.status) && <span class="spinner" role="img" aria-label="in progress" />}
                <span class="task-model">{r.model}</span>
                {r.kind === 'video' && (
                  <span class="task-video">
                    {r.seconds} s · {r.size}
                    {UNFINISHED.includes(r.status) && r.progress ? ` · ${r.progress}%` : ''}
                  </span>
                )}
                <span class="task-elapsed" title="Time since it was submitted">
                  {elapsed(r, now)}
                </span>
                <time class="task-time" dateTime={new Date(r.created_at * 1000).toISOString()}>
                  {new Date(r.created_at * 1000).toLocaleString()}
                </time>
              </div>
              {r.prompt && <p class="task-prompt">{r.prompt}</p>}
              <code class="task-id">{r.id}</code>
              {r.status === 'failed' && r.error && <ErrorBox error={r.error} />}
              {r.status === 'uncertain' && (
                <p class="uncertain">
                  Kiln cannot tell whether the generator produced this {r.kind}: the request reached it, but no answer
                  came back in time. It may have been made (and billed) without a result being kept. Check before
                  submitting the same prompt again.
                  {r.uncertain_reason && <span class="reason"> Reason: {r.uncertain_reason}</span>}
                </p>
              )}
            </li>
          ))}
        </ul>
      )}
      {onMore && (
        <button type="button" class="secondary more" onClick={onMore}>
          Load older tasks
        </button>
      )}
    </section>
  );
}

export interface Opened {
  id: string;
  media: Media;
  row: Row;
}

const altOf = (row: Row, m: Media) => row.prompt ?? `${m.type === 'video' ? 'Video' : 'Image'} of task ${row.id}`;

export function Gallery(props: { rows: Row[]; publicBaseUrl: string | null; onOpen: (o: Opened) => void }) {
  const { rows, onOpen } = props;
  const items = rows.flatMap((r) => r.media.map((m, i) => ({ key: `${r.id}:${i}`, m, row: r })));
  return (
    <section class="card gallery" aria-labelledby="gallery-title">
      <h2 id="gallery-title">Gallery</h2>
      {items.length === 0 ? (
        <p class="empty">Finished images and videos appear here.</p>
      ) : (
        <div class="grid">
          {items.map(({ key, m, row }) => (
            <figure key={key} data-task-id={row.id} data-type={m.type}>
              {m.type === 'video' ? (
                <>
                  {/* Plays in place; the button below opens the full view. */}
                  <video
                    src={pageUrl(m.url, props.publicBaseUrl)}
                    controls
                    playsInline
                    muted
                    preload="metadata"
                    aria-label={altOf(row, m)}
                  />
                  <button
                    type="button"
                    class="secondary small open"
                    onClick={() => onOpen({ id: row.id, media: m, row })}
                    aria-label={`Details of the video of task ${row.id}`}
                  >
                    Details
                  </button>
                </>
              ) : (
                <button
                  type="button"
                  class="thumb"
                  onClick={() => onOpen({ id: row.id, media: m, row })}
                  aria-label={`Open image of task ${row.id}`}
                >
                  <img src={pageUrl(m.url, props.publicBaseUrl)} loading="lazy" decoding="async" alt={altOf(row, m)} />
                </button>
              )}
              {row.prompt && <figcaption>{row.prompt}</figcaption>}
            </figure>
          ))}
        </div>
      )}
    </section>
  );
}

export function Detail(props: {
  row: Row;
  media: Media;
  temporalUrl: string | null;
  publicBaseUrl: string | null;
  onClose: () => void;
}) {
  const { row, media } = props;
  // Shown and downloaded through this page's origin; "Copy URL" copies the API's own URL.
  const src = pageUrl(media.url, props.publicBaseUrl);
  const ref = useRef<HTMLDialogElement>(null);
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  const fmt = (t?: number | null) => (t ? new Date(t * 1000).toLocaleString() : '—');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(media.url);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  const ext = /\.([a-z0-9]{2,5})(\?|$)/i.exec(new URL(media.url, location.href).pathname)?.[1];
  return (
    <dialog ref={ref} class="detail" onClose={props.onClose} aria-labelledby="detail-title">
      <div class="detail-body">
        {media.type === 'video' ? (
          <video src={src} controls playsInline muted aria-label={altOf(row, media)} />
        ) : (
          <img src={src} alt={altOf(row, media)} />
        )}
        <div class="detail-meta">
          <h2 id="detail-title">{media.type === 'video' ? 'Video' : 'Image'}</h2>
          <dl>
            {row.prompt && (
              <>
                <dt>Prompt</dt>
                <dd>{row.prompt}</dd>
              </>
            )}
            <dt>Model</dt>
            <dd>{row.model}</dd>
            {row.kind === 'video' && (
              <>
                <dt>Length and size</dt>
                <dd>
                  {row.seconds} s, {row.size}
                </dd>
              </>
            )}
            <dt>Submitted</dt>
            <dd>{fmt(row.created_at)}</dd>
            <dt>Finished</dt>
            <dd>
              {fmt(row.finished_at)} {row.finished_at ? `(${elapsed(row, Date.now())})` : ''}
            </dd>
            <dt>Task id</dt>
            <dd>
              <code>{row.id}</code>
            </dd>
          </dl>
          <div class="actions">
            <a class="button" href={src} download={`${row.id}.${ext ?? (media.type === 'video' ? 'mp4' : 'png')}`}>
              Download
            </a>
            <button type="button" class="secondary" onClick={copy}>
              {copied ? 'Copied' : 'Copy URL'}
            </button>
            {props.temporalUrl && (
              <a
                class="button secondary temporal"
                href={`${props.temporalUrl}${encodeURIComponent(row.id)}`}
                target="_blank"
                rel="noopener noreferrer"
              >
                Open in Temporal Web UI
              </a>
            )}
            <button type="button" class="secondary" onClick={() => ref.current?.close()}>
              Close
            </button>
          </div>
        </div>
      </div>
    </dialog>
  );
}
