// Kiln Console: sign in with an API key, create image tasks, watch them finish, see the images.
// All calls go through Kiln's own client (src/client), to this page's origin only.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  AuthenticationError,
  Kiln,
  KilnAPIError,
  imageUrlsOf,
  type BatchItem,
  type TaskListItem,
  type TaskStatus,
} from '../../src/client/index.js';
import { checkHttpUrl } from '../../src/shared/http-url.js';
import { LIMITS, chars } from '../../src/shared/limits.js';
import { ChatPanel } from './chat.js';
import { clearKey, loadKey, saveKey } from './key.js';

export function App() {
  const [key, setKey] = useState<string | null>(() => loadKey());
  const client = useMemo(
    () => (key ? new Kiln({ baseURL: location.origin, apiKey: key, maxRetries: 1 }) : null),
    [key],
  );
  const [tab, setTab] = useState<'images' | 'chat'>('images');
  const signOut = () => {
    setTab('images');
    clearKey();
    setKey(null);
  };
  return (
    <>
      <header class="top">
        <h1>
          <span class="logo" aria-hidden="true">
            K
          </span>
          Kiln Console
        </h1>
        {client && (
          <button type="button" class="secondary" onClick={signOut}>
            Sign out
          </button>
        )}
      </header>
      <main>
        {client ? (
          <>
            <nav class="tabs" aria-label="Sections">
              {(['images', 'chat'] as const).map((t) => (
                <button
                  key={t}
                  type="button"
                  class={tab === t ? 'tab active' : 'tab'}
                  aria-current={tab === t ? 'page' : undefined}
                  onClick={() => setTab(t)}
                >
                  {t === 'images' ? 'Images' : 'Chat'}
                </button>
              ))}
            </nav>
            <div hidden={tab !== 'images'}>
              <Workspace client={client} onUnauthorized={signOut} />
            </div>
            {tab === 'chat' && <ChatPanel client={client} onUnauthorized={signOut} />}
          </>
        ) : (
          <SignIn
            onSignIn={(k, remember) => {
              saveKey(k, remember);
              setKey(k);
            }}
          />
        )}
      </main>
    </>
  );
}

/** `{code, message}` of a refusal, as the API words it. */
function describeError(err: unknown): { code: string; message: string } {
  if (err instanceof KilnAPIError) {
    const body = err.body as { error?: { message?: string } } | null;
    return { code: err.code, message: body?.error?.message ?? err.message };
  }
  return { code: 'network_error', message: err instanceof Error ? err.message : String(err) };
}

function ErrorBox({ error }: { error: { code: string; message: string } | null }) {
  if (!error) return null;
  return (
    <div class="error" role="alert">
      <code class="error-code">{error.code}</code> <span class="error-message">{error.message}</span>
    </div>
  );
}

function SignIn({ onSignIn }: { onSignIn: (key: string, remember: boolean) => void }) {
  const [value, setValue] = useState('');
  const [remember, setRemember] = useState(false);
  const [checking, setChecking] = useState(false);
  const [error, setError] = useState<{ code: string; message: string } | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const key = value.trim();
    if (!key) return;
    setChecking(true);
    setError(null);
    try {
      // Checks the key (GET /v1/models answers 401 to a wrong one) before keeping it.
      await new Kiln({ baseURL: location.origin, apiKey: key, maxRetries: 0 }).models();
      onSignIn(key, remember);
    } catch (err) {
      setError(
        err instanceof AuthenticationError
          ? { code: err.code, message: 'Kiln does not accept this key: it is wrong, revoked, or for another server.' }
          : describeError(err),
      );
    } finally {
      setChecking(false);
    }
  };
  return (
    <form class="card signin" onSubmit={submit} aria-labelledby="signin-title">
      <h2 id="signin-title">Sign in</h2>
      <label for="api-key">API key</label>
      <input
        id="api-key"
        name="api-key"
        type="password"
        autocomplete="off"
        spellcheck={false}
        value={value}
        onInput={(e) => setValue((e.target as HTMLInputElement).value)}
        placeholder="Paste your Kiln API key"
      />
      <label class="check">
        <input
          type="checkbox"
          checked={remember}
          onChange={(e) => setRemember((e.target as HTMLInputElement).checked)}
        />
        Remember on this device
      </label>
      <p class="hint">
        The key stays in this tab (session storage) unless you tick the box; it is sent only to this Kiln, in a header.
        Sign out forgets it.
      </p>
      <button type="submit" disabled={checking || !value.trim()}>
        {checking ? 'Checking…' : 'Sign in'}
      </button>
      <ErrorBox error={error} />
    </form>
  );
}

interface Row {
  id: string;
  model: string;
  status: TaskStatus;
  created_at: number;
  finished_at?: number | null;
  prompt?: string;
  error?: { code: string; message: string } | null;
  uncertain_reason?: string;
  urls: string[];
  /** Details (images, error) fetched with batch-get: list items do not carry them. */
  loaded: boolean;
}

const UNFINISHED: readonly TaskStatus[] = ['accepted', 'queued', 'running'];
const DEFAULT_POLL_MS = 10_000;

function Workspace({ client, onUnauthorized }: { client: Kiln; onUnauthorized: () => void }) {
  const [rows, setRows] = useState<Row[]>([]);
  const [banner, setBanner] = useState<{ code: string; message: string } | null>(null);
  const rowsRef = useRef(rows);
  rowsRef.current = rows;
  // The server's polling guidance: the next batch-get no sooner than this (next_poll_after_ms, Retry-After).
  const nextPollAt = useRef(0);
  const pollMs = useRef(DEFAULT_POLL_MS);
  const polling = useRef(false);
  const [open, setOpen] = useState<{ id: string; url: string; row: Row } | null>(null);

  const fail = (err: unknown) => {
    if (err instanceof AuthenticationError) return onUnauthorized();
    setBanner(describeError(err));
  };

  const merge = (items: BatchItem[]) =>
    setRows((prev) =>
      prev.flatMap((r) => {
        const it = items.find((i) => i.id === r.id);
        if (!it) return [r];
        if (it.status === 'not_found') return [];
        return [
          {
            ...r,
            status: it.status,
            model: it.model ?? r.model,
            finished_at: it.finished_at ?? r.finished_at,
            error: it.error ? { code: it.error.code, message: it.error.message } : null,
            uncertain_reason: it.uncertain_reason,
            urls: imageUrlsOf(it),
            loaded: true,
          },
        ];
      }),
    );

  const [more, setMore] = useState(false);
  const PAGE = 20;
  const adopt = (items: TaskListItem[], prev: Row[]) => {
    const known = new Map(prev.map((r) => [r.id, r]));
    return items.map((i) => {
      const k = known.get(i.id);
      return k && k.status === i.status ? k : { ...i, prompt: k?.prompt, urls: [], loaded: false };
    });
  };
  /** The newest page (sign-in, Refresh), or the next older one (`before` the oldest row shown). */
  const loadList = async (older = false) => {
    try {
      const last = rowsRef.current[rowsRef.current.length - 1];
      const cursor = older && last ? { before_created_at: last.created_at, before_id: last.id } : {};
      const page = await client.tasks.listPage({ days: 3, limit: PAGE, ...cursor });
      setRows((prev) => {
        const fresh = adopt(page.items, prev);
        const rest = prev.filter((r) => !page.items.some((i) => i.id === r.id));
        return [...rest, ...fresh].sort((a, b) => b.created_at - a.created_at || (b.id < a.id ? -1 : 1));
      });
      if (!older || page.items.length < PAGE) setMore(page.items.length === PAGE);
      nextPollAt.current = 0;
      setBanner(null);
    } catch (err) {
      fail(err);
    }
  };

  useEffect(() => {
    void loadList();
    // A cheap local tick; a request goes out only when some task needs it and the guidance allows.
    const tick = setInterval(async () => {
      if (polling.current || Date.now() < nextPollAt.current) return;
      const ids = rowsRef.current
        .filter((r) => UNFINISHED.includes(r.status) || !r.loaded)
        .map((r) => r.id)
        .slice(0, 100);
      if (ids.length === 0) return;
      polling.current = true;
      try {
        const res = await client.tasks.batchGet(ids);
        pollMs.current = res.next_poll_after_ms || DEFAULT_POLL_MS;
        nextPollAt.current = Date.now() + pollMs.current;
        merge(res.items);
        setBanner(null);
      } catch (err) {
        const after = err instanceof KilnAPIError && err.retryAfter !== undefined ? err.retryAfter * 1000 : 0;
        nextPollAt.current = Date.now() + Math.max(after, pollMs.current);
        fail(err);
      } finally {
        polling.current = false;
      }
    }, 250);
    return () => clearInterval(tick);
  }, [client]);

  const submitted = (row: Row) => {
    setRows((prev) => [row, ...prev.filter((r) => r.id !== row.id)]);
    // The first check waits for the server's interval, like every later one.
    nextPollAt.current = Math.max(nextPollAt.current, Date.now() + pollMs.current);
  };

  return (
    <div class="workspace">
      <CreateForm client={client} onSubmitted={submitted} onUnauthorized={onUnauthorized} />
      <ErrorBox error={banner} />
      <TaskList rows={rows} onRefresh={() => loadList()} onMore={more ? () => loadList(true) : undefined} />
      <Gallery rows={rows} onOpen={setOpen} />
      {open && (
        <Detail row={rows.find((r) => r.id === open.id) ?? open.row} url={open.url} onClose={() => setOpen(null)} />
      )}
    </div>
  );
}

const ASPECTS = ['1:1', '16:9', '9:16', '4:3', '3:4', '3:2', '2:3', '21:9'];
const SIZES = ['1K', '2K', '4K'];

type Field = 'prompt' | 'model' | 'aspect' | 'size' | 'refs' | 'form';
interface FieldError {
  field: Field;
  /** Which reference row (0-based), for reference errors that name one. */
  index?: number;
  code: string;
  message: string;
}

/** The field an API refusal belongs to, read from its code and message. */
function fieldOf(e: { code: string; message: string }): FieldError {
  const ref = /reference image (\d+)/.exec(e.message);
  if (e.code === 'prompt_too_long' || /prompt/i.test(e.message)) return { field: 'prompt', ...e };
  if (e.code.startsWith('invalid_reference_image') || e.code === 'too_many_reference_images')
    return { field: 'refs', ...(ref ? { index: Number(ref[1]) - 1 } : {}), ...e };
  if (e.code === 'model_not_found') return { field: 'model', ...e };
  if (/aspectRatio/.test(e.message)) return { field: 'aspect', ...e };
  if (/imageSize/.test(e.message)) return { field: 'size', ...e };
  return { field: 'form', ...e };
}

/** The API's own check of a reference URL (src/shared/http-url.ts), run before submitting. */
function checkReference(url: string, i: number): FieldError | null {
  try {
    checkHttpUrl(url.trim(), 'inlineData.data', `reference image ${i + 1}`);
    return null;
  } catch (err) {
    const e = err as { code: string; message: string };
    return { field: 'refs', index: i, code: e.code, message: e.message };
  }
}

function FieldMessage({ id, error }: { id: string; error: FieldError | null | undefined }) {
  if (!error) return null;
  return (
    <p class="field-error" id={id} role="alert">
      <code class="error-code">{error.code}</code> <span class="error-message">{error.message}</span>
    </p>
  );
}

function CreateForm({
  client,
  onSubmitted,
  onUnauthorized,
}: {
  client: Kiln;
  onSubmitted: (row: Row) => void;
  onUnauthorized: () => void;
}) {
  const [models, setModels] = useState<string[]>([]);
  const [model, setModel] = useState('');
  const [prompt, setPrompt] = useState('');
  const [aspect, setAspect] = useState('');
  const [size, setSize] = useState('');
  const [refs, setRefs] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  const [apiError, setApiError] = useState<FieldError | null>(null);

  useEffect(() => {
    client
      .models()
      .then((all) => {
        const ids = all.filter((m) => (m.kind ?? 'image') === 'image').map((m) => m.id);
        setModels(ids);
        setModel((m) => m || ids[0] || '');
      })
      .catch((err) =>
        err instanceof AuthenticationError ? onUnauthorized() : setApiError(fieldOf(describeError(err))),
      );
  }, [client]);

  const count = chars(prompt);
  const over = count > LIMITS.promptChars;
  // Checked as the API checks them, so most refusals show before a request is made.
  const refErrors = refs.map((r, i) => checkReference(r, i));
  const invalid = over || refErrors.some(Boolean) || refs.length > LIMITS.referenceImages;
  const errorFor = (field: Field, index?: number): FieldError | null =>
    apiError && apiError.field === field && (index === undefined || apiError.index === index) ? apiError : null;
  const change = (set: (v: string) => void) => (e: Event) => {
    set((e.target as HTMLInputElement).value);
    setApiError(null);
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setApiError(null);
    try {
      const task = await client.tasks.create({
        model,
        prompt,
        ...(aspect ? { aspectRatio: aspect } : {}),
        ...(size ? { imageSize: size } : {}),
        ...(refs.length ? { references: refs.map((r) => r.trim()) } : {}),
      });
      onSubmitted({
        id: task.id,
        model: task.model,
        status: task.status,
        created_at: task.created_at ?? Math.floor(Date.now() / 1000),
        prompt,
        urls: [],
        loaded: false,
      });
      setPrompt('');
    } catch (err) {
      if (err instanceof AuthenticationError) return onUnauthorized();
      setApiError(fieldOf(describeError(err)));
    } finally {
      setBusy(false);
    }
  };

  const promptError = errorFor('prompt');
  return (
    <form class="card create" onSubmit={submit} aria-labelledby="create-title" noValidate>
      <h2 id="create-title">New image</h2>
      <div class="field">
        <label for="prompt">Prompt</label>
        <textarea
          id="prompt"
          rows={4}
          value={prompt}
          onInput={change(setPrompt)}
          placeholder="A lighthouse at dusk, oil painting"
          aria-invalid={over || !!promptError}
          aria-describedby={promptError ? 'prompt-counter prompt-error' : 'prompt-counter'}
        />
        <div class={over ? 'counter over' : 'counter'} aria-live="polite" id="prompt-counter">
          {count.toLocaleString('en')} / {LIMITS.promptChars.toLocaleString('en')}
          {over && ' — too long'}
        </div>
        <FieldMessage id="prompt-error" error={promptError} />
      </div>
      <div class="row">
        <div class="field">
          <label for="model">Model</label>
          <select id="model" value={model} onChange={change(setModel)}>
            {models.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
          <FieldMessage id="model-error" error={errorFor('model')} />
        </div>
        <div class="field">
          <label for="aspect">Aspect ratio</label>
          <select id="aspect" value={aspect} onChange={change(setAspect)}>
            <option value="">Auto</option>
            {ASPECTS.map((a) => (
              <option key={a} value={a}>
                {a}
              </option>
            ))}
          </select>
          <FieldMessage id="aspect-error" error={errorFor('aspect')} />
        </div>
        <div class="field">
          <label for="size">Image size</label>
          <select id="size" value={size} onChange={change(setSize)}>
            <option value="">Auto</option>
            {SIZES.map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
          <FieldMessage id="size-error" error={errorFor('size')} />
        </div>
      </div>
      <fieldset class="field refs">
        <legend>
          Reference images ({refs.length} / {LIMITS.referenceImages})
        </legend>
        {refs.map((r, i) => {
          const err = errorFor('refs', i) ?? (r.trim() ? refErrors[i] : null);
          return (
            <div class="ref-row" key={i}>
              <label class="visually-hidden" for={`ref-${i}`}>
                Reference image {i + 1} URL
              </label>
              <input
                id={`ref-${i}`}
                class="ref"
                type="url"
                value={r}
                placeholder="https://example.com/style.png"
                aria-invalid={!!err}
                aria-describedby={err ? `ref-${i}-error` : undefined}
                onInput={(e) => {
                  const v = (e.target as HTMLInputElement).value;
                  setRefs((prev) => prev.map((x, j) => (j === i ? v : x)));
                  setApiError(null);
                }}
              />
              <button
                type="button"
                class="secondary small"
                aria-label={`Remove reference image ${i + 1}`}
                onClick={() => setRefs((prev) => prev.filter((_, j) => j !== i))}
              >
                Remove
              </button>
              <FieldMessage id={`ref-${i}-error`} error={err} />
            </div>
          );
        })}
        <FieldMessage
          id="refs-error"
          error={apiError?.field === 'refs' && apiError.index === undefined ? apiError : null}
        />
        {refs.length < LIMITS.referenceImages && (
          <button type="button" class="secondary small" id="add-reference" onClick={() => setRefs((p) => [...p, ''])}>
            Add reference image URL
          </button>
        )}
      </fieldset>
      <button type="submit" id="create-submit" disabled={busy || !model || !prompt.trim() || invalid}>
        {busy ? 'Submitting…' : 'Generate'}
      </button>
      <FieldMessage id="form-error" error={errorFor('form')} />
    </form>
  );
}

const STATUS_TEXT: Record<TaskStatus, string> = {
  accepted: 'Accepted',
  queued: 'Queued',
  running: 'Running',
  succeeded: 'Succeeded',
  failed: 'Failed',
  uncertain: 'Uncertain',
};

function StatusChip({ status }: { status: TaskStatus }) {
  return <span class={`chip chip-${status}`}>{STATUS_TEXT[status] ?? status}</span>;
}

/** "12 s", "3 min 4 s": from creation to the end, or to now while unfinished. */
function elapsed(row: Row, now: number): string {
  const end = row.finished_at ? row.finished_at * 1000 : UNFINISHED.includes(row.status) ? now : null;
  if (end === null) return '';
  const s = Math.max(0, Math.round((end - row.created_at * 1000) / 1000));
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** Re-renders every second while something is unfinished (elapsed times tick). */
function useNow(active: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [active]);
  return now;
}

function TaskList({ rows, onRefresh, onMore }: { rows: Row[]; onRefresh: () => void; onMore?: () => void }) {
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
            <li key={r.id} class="task" data-task-id={r.id} data-status={r.status}>
              <div class="task-head">
                <StatusChip status={r.status} />
                {UNFINISHED.includes(r.status) && <span class="spinner" role="img" aria-label="in progress" />}
                <span class="task-model">{r.model}</span>
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
                  Kiln cannot tell whether the generator produced this image: the request reached it, but no answer came
                  back in time. It may have been made (and billed) without a result being kept. Check before submitting
                  the same prompt again.
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

function Gallery({ rows, onOpen }: { rows: Row[]; onOpen: (o: { id: string; url: string; row: Row }) => void }) {
  const images = rows.flatMap((r) => r.urls.map((url, i) => ({ key: `${r.id}:${i}`, url, row: r })));
  return (
    <section class="card gallery" aria-labelledby="gallery-title">
      <h2 id="gallery-title">Gallery</h2>
      {images.length === 0 ? (
        <p class="empty">Finished images appear here.</p>
      ) : (
        <div class="grid">
          {images.map(({ key, url, row }) => (
            <figure key={key} data-task-id={row.id}>
              <button
                type="button"
                class="thumb"
                onClick={() => onOpen({ id: row.id, url, row })}
                aria-label={`Open image of task ${row.id}`}
              >
                <img src={url} loading="lazy" decoding="async" alt={row.prompt ?? `Image of task ${row.id}`} />
              </button>
              {row.prompt && <figcaption>{row.prompt}</figcaption>}
            </figure>
          ))}
        </div>
      )}
    </section>
  );
}

function Detail({ row, url, onClose }: { row: Row; url: string; onClose: () => void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  const fmt = (t?: number | null) => (t ? new Date(t * 1000).toLocaleString() : '—');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(url);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return (
    <dialog ref={ref} class="detail" onClose={onClose} aria-labelledby="detail-title">
      <div class="detail-body">
        <img src={url} alt={row.prompt ?? `Image of task ${row.id}`} />
        <div class="detail-meta">
          <h2 id="detail-title">Image</h2>
          <dl>
            {row.prompt && (
              <>
                <dt>Prompt</dt>
                <dd>{row.prompt}</dd>
              </>
            )}
            <dt>Model</dt>
            <dd>{row.model}</dd>
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
            <a class="button" href={url} download={`${row.id}.png`}>
              Download
            </a>
            <button type="button" class="secondary" onClick={copy}>
              {copied ? 'Copied' : 'Copy URL'}
            </button>
            <button type="button" class="secondary" onClick={() => ref.current?.close()}>
              Close
            </button>
          </div>
        </div>
      </div>
    </dialog>
  );
}
