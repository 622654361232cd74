// Issuing a key on the Keys page (POST /admin/v1/keys): owner, label, allowed models and the key's
// own limits; then the key itself, which the API answers this once only. It is shown until the
// operator closes the box and lives in this component's state alone: never in storage, never in a URL.
import { useEffect, useRef, useState } from 'preact/hooks';
import { LimitInputs, draftOf, limitErrorOf, parseDraft, type LimitError } from './key-limits.js';
import { LIMIT_NAMES, createKey, type CreatedKey, type Limits, type NewKeyBody } from './keys-api.js';
import { ErrorBox, Field, valueOf, type ApiError } from './ui.js';

type TextField = 'owner' | 'label' | 'models';
type FormError = (ApiError & { field: TextField }) | null;

/** A refusal that names a field (`body.owner: …`, `body.models[1]: …`) goes next to it. */
function fieldOf(e: ApiError): FormError {
  const m = /^body\.(owner|label|models)\b/.exec(e.message);
  return m ? { ...e, field: m[1] as TextField } : null;
}

/** Model ids as typed, split on commas and spaces; none: every model. */
const modelsOf = (text: string) => text.split(/[\s,]+/).filter(Boolean);

/** Only the limits that were set: an issue has nothing to clear. */
const setLimits = (l: Limits): Partial<Limits> | undefined => {
  const set = Object.fromEntries(LIMIT_NAMES.filter((n) => l[n] !== null).map((n) => [n, l[n]]));
  return Object.keys(set).length ? set : undefined;
};

export function IssueForm(props: {
  token: string;
  onCreated: (k: CreatedKey) => void;
  onTokenRefused: (e: ApiError) => void;
}) {
  const [owner, setOwner] = useState('');
  const [label, setLabel] = useState('');
  const [models, setModels] = useState('');
  const [limits, setLimitDraft] = useState(() => draftOf());
  const [fieldError, setFieldError] = useState<FormError>(null);
  const [limitError, setLimitError] = useState<LimitError | null>(null);
  const [banner, setBanner] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const clear = () => {
    setFieldError(null);
    setLimitError(null);
    setBanner(null);
  };
  const errorFor = (f: TextField) => (fieldError?.field === f ? fieldError : null);

  const submit = async (e: Event) => {
    e.preventDefault();
    clear();
    const parsed = parseDraft(limits);
    if ('error' in parsed) return setLimitError(parsed.error);
    const body: NewKeyBody = { owner: owner.trim() };
    if (label.trim()) body.label = label.trim();
    if (modelsOf(models).length) body.models = modelsOf(models);
    const own = setLimits(parsed.limits);
    if (own) body.limits = own;
    setBusy(true);
    const r = await createKey(props.token, body);
    setBusy(false);
    if (r.ok) {
      setOwner('');
      setLabel('');
      setModels('');
      setLimitDraft(draftOf());
      return props.onCreated(r.data);
    }
    if (r.status === 401) return props.onTokenRefused(r.error);
    const onLimit = limitErrorOf(r.error);
    const onField = fieldOf(r.error);
    if (onLimit) setLimitError(onLimit);
    else if (onField) setFieldError(onField);
    else setBanner(r.error);
  };
  const text = (set: (v: string) => void) => (e: Event) => {
    set(valueOf(e));
    clear();
  };

  return (
    <form class="issue-key" onSubmit={submit} noValidate aria-labelledby="issue-title">
      <h3 id="issue-title">Issue a key</h3>
      <div class="row">
        <Field id="new-owner" label="Owner" error={errorFor('owner')}>
          {(c) => (
            <input
              {...c}
              type="text"
              required
              autocomplete="off"
              spellcheck={false}
              value={owner}
              onInput={text(setOwner)}
            />
          )}
        </Field>
        <Field id="new-label" label="Label (optional)" error={errorFor('label')}>
          {(c) => <input {...c} type="text" autocomplete="off" value={label} onInput={text(setLabel)} />}
        </Field>
        <Field
          id="new-models"
          label="Allowed models (optional)"
          error={errorFor('models')}
          note="Model ids, separated by commas; empty: every model."
        >
          {(c) => (
            <input {...c} type="text" autocomplete="off" spellcheck={false} value={models} onInput={text(setModels)} />
          )}
        </Field>
      </div>
      <LimitInputs
        prefix="new-limit"
        legend="Limits of this key (optional)"
        draft={limits}
        error={limitError}
        onChange={(d) => {
          setLimitDraft(d);
          clear();
        }}
      />
      <ErrorBox error={banner} />
      <button type="submit" id="issue-submit" disabled={busy || !owner.trim()}>
        {busy ? 'Issuing…' : 'Issue key'}
      </button>
    </form>
  );
}

/** The new key, once: a read-only field to select, a copy button, and "Done", which forgets it. */
export function NewKeySecret({ created, onDone }: { created: CreatedKey; onDone: () => void }) {
  const input = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<string>('');
  // Focus lands on the key, so a keyboard or screen reader user meets it first.
  useEffect(() => {
    input.current?.focus();
    input.current?.select();
  }, [created.key]);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.key);
      setCopied('Copied to the clipboard.');
    } catch {
      // No clipboard access (permissions, an insecure origin): leave it selected to copy by hand.
      input.current?.select();
      setCopied('Could not copy: the key is selected, copy it by hand.');
    }
  };
  return (
    <section class="new-key" aria-labelledby="new-key-title">
      <h3 id="new-key-title">New key for {created.owner}</h3>
      <p class="hint">
        Copy it now: Kiln shows a key only once and keeps only its hash. This page forgets it when you press Done or
        leave the page.
      </p>
      <div class="secret-row">
        <Field id="new-key-secret" label="API key (shown once)" note={copied}>
          {(c) => (
            <input
              {...c}
              ref={input}
              type="text"
              readOnly
              autocomplete="off"
              spellcheck={false}
              value={created.key}
              onFocus={(e) => (e.target as HTMLInputElement).select()}
            />
          )}
        </Field>
        <button type="button" id="copy-key" class="secondary" onClick={copy}>
          Copy key
        </button>
      </div>
      <button type="button" id="new-key-done" onClick={onDone}>
        Done
      </button>
    </section>
  );
}
