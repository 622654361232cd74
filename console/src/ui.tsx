// Small pieces every page uses: the labelled form field, error boxes, status chips and elapsed times.
import type { ComponentChildren, JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { AuthenticationError, KilnAPIError, type TaskStatus } from '../../src/client/index.js';

export interface ApiError {
  code: string;
  message: string;
}

/** `{code, message}` of a refusal, as the API words it. */
export function describeError(err: unknown): ApiError {
  if (err instanceof KilnAPIError) {
    const body = err.body as { error?: { message?: string } } | null;
    return { code: err.code, message: body?.error?.message ?? err.message };
  }
  return { code: 'network_error', message: err instanceof Error ? err.message : String(err) };
}

export function ErrorBox({ error }: { error: ApiError | null | undefined }) {
  if (!error) return null;
  return (
    <div class="error" role="alert">
      <code class="error-code">{error.code}</code> <span class="error-message">{error.message}</span>
    </div>
  );
}

/** An error next to the control it belongs to; `id` is what the control's aria-describedby names. */
export function FieldMessage({ id, error }: { id: string; error: ApiError | null | undefined }) {
  if (!error) return null;
  return (
    <p class="field-error" id={id} role="alert">
      <code class="error-code">{error.code}</code> <span class="error-message">{error.message}</span>
    </p>
  );
}

/** What a Field hands its control: the id its label points at and the ARIA links to notes and errors. */
export interface ControlProps {
  id: string;
  'aria-invalid': boolean;
  'aria-describedby'?: string;
}

/**
 * Label + control + error text. The control is a render prop so that it gets the label's id and the
 * ARIA links itself; `note` (a counter, a hint) goes under it with the id `${id}-note`.
 */
export function Field(props: {
  id: string;
  label: string;
  error?: ApiError | null;
  invalid?: boolean;
  note?: ComponentChildren;
  noteClass?: string;
  class?: string;
  children: (control: ControlProps) => JSX.Element;
}) {
  const { id, label, error, note } = props;
  const described = [note !== undefined && `${id}-note`, error && `${id}-error`].filter(Boolean).join(' ');
  return (
    <div class={props.class ? `field ${props.class}` : 'field'}>
      <label for={id}>{label}</label>
      {props.children({
        id,
        'aria-invalid': !!error || !!props.invalid,
        ...(described ? { 'aria-describedby': described } : {}),
      })}
      {note !== undefined && (
        <div class={props.noteClass ?? 'hint'} id={`${id}-note`} aria-live="polite">
          {note}
        </div>
      )}
      <FieldMessage id={`${id}-error`} error={error} />
    </div>
  );
}

/** A pasted secret (an API key, the operator token): hidden, never autocompleted or spell-checked. */
export function SecretField(props: {
  id: string;
  label: string;
  error: ApiError | null;
  value: string;
  placeholder: string;
  onInput: (value: string) => void;
}) {
  return (
    <Field id={props.id} label={props.label} error={props.error}>
      {(c) => (
        <input
          {...c}
          name={props.id}
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={props.value}
          onInput={(e) => props.onInput(valueOf(e))}
          placeholder={props.placeholder}
        />
      )}
    </Field>
  );
}

/** A table in a region of its own: it scrolls sideways on a narrow screen and is reachable by keyboard. */
export function TableWrap(props: { labelledBy: string; class: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" role="region" aria-labelledby={props.labelledBy} tabIndex={0}>
      <table class={props.class}>{props.children}</table>
    </div>
  );
}

/** A select over fixed values; `auto` adds a first, empty choice with that label. */
export function Choices({
  control,
  value,
  values,
  auto,
  onChange,
}: {
  control: ControlProps;
  value: string;
  values: readonly string[];
  auto?: string;
  onChange: (v: string) => void;
}) {
  return (
    <select {...control} value={value} onChange={(e) => onChange((e.target as HTMLSelectElement).value)}>
      {auto !== undefined && <option value="">{auto}</option>}
      {values.map((v) => (
        <option key={v} value={v}>
          {v}
        </option>
      ))}
    </select>
  );
}

/** Value of an input event's target. */
export const valueOf = (e: Event) => (e.target as HTMLInputElement).value;

/** The fields that were filled in: an empty choice is not sent, so the API's default applies. */
export function filledIn<T extends Record<string, unknown>>(fields: T): Partial<T> {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined && v !== '')) as Partial<T>;
}

export const UNFINISHED: readonly TaskStatus[] = ['accepted', 'queued', 'running'];

const STATUS_TEXT: Record<TaskStatus, string> = {
  accepted: 'Accepted',
  queued: 'Queued',
  running: 'Running',
  succeeded: 'Succeeded',
  failed: 'Failed',
  uncertain: 'Uncertain',
};

export function StatusChip({ status }: { status: TaskStatus }) {
  return <span class={`chip chip-${status}`}>{STATUS_TEXT[status] ?? status}</span>;
}

/** "12 s", "3 min 4 s": from creation to the end, or to now while unfinished. */
export function elapsed(
  row: { status: TaskStatus; created_at: number; finished_at?: number | null },
  now: number,
): string {
  const end = row.finished_at ? row.finished_at * 1000 : UNFINISHED.includes(row.status) ? now : null;
  if (end === null) return '';
  const s = Math.max(0, Math.round((end - row.created_at * 1000) / 1000));
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** Re-renders every second while something is unfinished (elapsed times tick). */
export function useNow(active: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [active]);
  return now;
}

/** An API refusal placed on a form field; `index` is the row of a repeated field (reference, node). */
export interface FieldError<T extends string> extends ApiError {
  field: T;
  index?: number;
}

/**
 * A create form's submit: busy while the request runs, a refused key signs out, any other refusal is
 * placed on its field by `fieldOf`; any change to a field clears it (`change`).
 */
export function useSubmit<T extends string>(fieldOf: (e: ApiError) => FieldError<T>, onUnauthorized: () => void) {
  const [busy, setBusy] = useState(false);
  const [apiError, setApiError] = useState<FieldError<T> | null>(null);
  const errorFor = (field: T, index?: number): FieldError<T> | null =>
    apiError && apiError.field === field && (index === undefined || apiError.index === index) ? apiError : null;
  const change = (set: (v: string) => void) => (v: string) => {
    set(v);
    setApiError(null);
  };
  const submit = (action: () => Promise<void>) => async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setApiError(null);
    try {
      await action();
    } catch (err) {
      if (err instanceof AuthenticationError) return onUnauthorized();
      setApiError(fieldOf(describeError(err)));
    } finally {
      setBusy(false);
    }
  };
  return { busy, apiError, clear: () => setApiError(null), errorFor, change, submit };
}
