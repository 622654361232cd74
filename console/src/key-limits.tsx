// A key's own limits on the Keys page: the four fields (issue form and editor alike), their check
// before sending (whole numbers, 0 to the API's maximum; empty means none), how the list shows them,
// and the editor that changes them with PATCH /admin/v1/keys/{id}.
import { useState } from 'preact/hooks';
import { LIMIT_NAMES, MAX_LIMIT, updateLimits, type KeyView, type LimitName, type Limits } from './keys-api.js';
import type { AdminAnswer } from './operator.js';
import { ErrorBox, Field, valueOf, type ApiError } from './ui.js';

export const LIMIT_LABELS: Record<LimitName, string> = {
  max_unfinished: 'Max unfinished tasks',
  submits_per_minute: 'Submits per minute',
  daily_units: 'Daily units',
  monthly_units: 'Monthly units',
};

/** The fields as typed: text, so that an empty one can mean "no limit". */
export type LimitDraft = Record<LimitName, string>;

export const draftOf = (l?: Limits): LimitDraft =>
  Object.fromEntries(LIMIT_NAMES.map((n) => [n, l?.[n] == null ? '' : String(l[n])])) as LimitDraft;

export interface LimitError extends ApiError {
  field: LimitName;
}

/** Every limit (null where the field is empty), or the first field that is not a whole number in range. */
export function parseDraft(d: LimitDraft): { limits: Limits } | { error: LimitError } {
  const limits = {} as Limits;
  for (const n of LIMIT_NAMES) {
    const text = d[n].trim();
    if (text === '') {
      limits[n] = null;
      continue;
    }
    const v = Number(text);
    if (!/^\d+$/.test(text) || v > MAX_LIMIT)
      return {
        error: {
          field: n,
          code: 'invalid_request',
          message: `must be a whole number from 0 to ${MAX_LIMIT.toLocaleString('en')}`,
        },
      };
    limits[n] = v;
  }
  return { limits };
}

/** An API refusal that names one limit (`body.limits.daily_units: …`) lands on that field. */
export function limitErrorOf(e: ApiError): LimitError | null {
  const m = /^body\.limits\.(\w+)/.exec(e.message);
  const field = LIMIT_NAMES.find((n) => n === m?.[1]);
  return field ? { ...e, field } : null;
}

export function LimitInputs(props: {
  prefix: string;
  legend: string;
  draft: LimitDraft;
  error: LimitError | null;
  onChange: (d: LimitDraft) => void;
}) {
  return (
    <fieldset class="limits">
      <legend>{props.legend}</legend>
      <div class="limit-row">
        {LIMIT_NAMES.map((n) => (
          <Field
            key={n}
            id={`${props.prefix}-${n}`}
            label={LIMIT_LABELS[n]}
            error={props.error?.field === n ? props.error : null}
          >
            {(c) => (
              <input
                {...c}
                type="number"
                min={0}
                max={MAX_LIMIT}
                step={1}
                inputMode="numeric"
                placeholder="No limit"
                value={props.draft[n]}
                onInput={(e) => props.onChange({ ...props.draft, [n]: valueOf(e) })}
              />
            )}
          </Field>
        ))}
      </div>
    </fieldset>
  );
}

/** The limits a key has, one per line; a dash when it has none of its own. */
export function LimitsText({ limits }: { limits?: Limits }) {
  const set = LIMIT_NAMES.filter((n) => limits?.[n] != null);
  if (!set.length) return <>—</>;
  return (
    <ul class="limit-list">
      {set.map((n) => (
        <li key={n} data-limit={n}>
          {LIMIT_LABELS[n]}: <span class="num">{limits![n]!.toLocaleString('en')}</span>
        </li>
      ))}
    </ul>
  );
}

/** Changes every limit of one key at once: an emptied field clears that limit (null). */
export function LimitsEditor(props: {
  token: string;
  view: KeyView;
  onSaved: (v: KeyView) => void;
  onCancel: () => void;
  onTokenRefused: (e: ApiError) => void;
}) {
  const [draft, setDraft] = useState(() => draftOf(props.view.limits));
  const [error, setError] = useState<LimitError | null>(null);
  const [banner, setBanner] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const titleId = `limits-title-${props.view.id}`;
  const save = async (e: Event) => {
    e.preventDefault();
    const parsed = parseDraft(draft);
    if ('error' in parsed) return setError(parsed.error);
    setBusy(true);
    const r: AdminAnswer<KeyView> = await updateLimits(props.token, props.view.id, parsed.limits);
    setBusy(false);
    if (r.ok) return props.onSaved(r.data);
    // Once the list loaded, only a 401 is about the token (a 404 here is a key that is gone).
    if (r.status === 401) return props.onTokenRefused(r.error);
    const onField = limitErrorOf(r.error);
    if (onField) setError(onField);
    else setBanner(r.error);
  };
  return (
    <form class="limits-editor" onSubmit={save} noValidate aria-labelledby={titleId}>
      <h4 id={titleId}>
        Limits of {props.view.hint}… ({props.view.owner})
      </h4>
      <p class="hint">Counted over this key alone; the owner&apos;s limits apply all the same. Empty: no limit.</p>
      <LimitInputs
        prefix="edit-limit"
        legend="Limits of this key"
        draft={draft}
        error={error}
        onChange={(d) => {
          setDraft(d);
          setError(null);
          setBanner(null);
        }}
      />
      <ErrorBox error={banner} />
      <div class="editor-actions">
        <button type="submit" disabled={busy}>
          {busy ? 'Saving…' : 'Save limits'}
        </button>
        <button type="button" class="secondary" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
