// The Keys page, for operators of a Kiln in keys mode (AUTH_MODE=keys): the issued API keys from
// GET /admin/v1/keys, issuing one (its secret shown once), changing a key's own limits and revoking
// it. Like the Channels page it takes the operator token, kept in this tab only once Kiln accepted it.
import { useEffect, useState } from 'preact/hooks';
import { IssueForm, NewKeySecret } from './key-create.js';
import { LimitsEditor, LimitsText } from './key-limits.js';
import { clearOperatorToken, loadOperatorToken, saveOperatorToken } from './key.js';
import { listKeys, revokeKey, stateOf, type CreatedKey, type KeyState, type KeyView } from './keys-api.js';
import { tokenRefused, TokenForm } from './operator.js';
import { ErrorBox, TableWrap, type ApiError } from './ui.js';

const STATE_TEXT: Record<KeyState, string> = { active: 'Active', revoked: 'Revoked', expired: 'Expired' };
const date = (s: number | null, none: string) =>
  s === null ? none : new Date(s * 1000).toLocaleString('en', { dateStyle: 'medium', timeStyle: 'short' });

export function KeysPanel() {
  const [token, setToken] = useState<string | null>(() => loadOperatorToken());
  const [keys, setKeys] = useState<KeyView[] | null>(null);
  const [hasMore, setHasMore] = useState(false);
  // The last id of the last page loaded: keys issued here are listed too, but are no cursor.
  const [cursor, setCursor] = useState<string | undefined>();
  const [error, setError] = useState<ApiError | null>(null);
  const [created, setCreated] = useState<CreatedKey | null>(null);
  // Bumped by each submit of the token form: the same token again (after a 503) asks again.
  const [asked, setAsked] = useState(0);

  /** Forgets the token (asked to, or it is wrong or was rotated) and asks again, saying why if refused. */
  const refused = (e: ApiError | null = null) => {
    clearOperatorToken();
    setToken(null);
    setKeys(null);
    setCreated(null);
    setError(e);
  };

  const load = async (t: string, after?: string) => {
    const r = await listKeys(t, after);
    if (r.ok) {
      saveOperatorToken(t);
      const page = r.data.data;
      const ids = new Set(page.map((k) => k.id));
      // A key issued here before its page came is listed once, where the page has it.
      setKeys((old) => (after && old ? [...old.filter((k) => !ids.has(k.id)), ...page] : page));
      setHasMore(r.data.has_more);
      setCursor(page[page.length - 1]?.id ?? after);
      setError(null);
    } else if (tokenRefused(r.status) && !after) refused(r.error);
    else setError(r.error);
  };

  useEffect(() => {
    if (token) void load(token);
  }, [token, asked]);

  if (!token || !keys)
    return (
      <TokenForm
        title="API keys"
        submitLabel="Show keys"
        checking={!!token && !error}
        error={error}
        onToken={(t) => {
          setError(null);
          setToken(t);
          setAsked((n) => n + 1);
        }}
      >
        Issue, limit and revoke API keys of a Kiln in keys mode. For operators: it needs the operator token.
      </TokenForm>
    );

  /** A key as the API now answers it replaces the one listed. */
  const replace = (v: KeyView) => setKeys((ks) => ks?.map((k) => (k.id === v.id ? v : k)) ?? null);

  return (
    <section class="card keys" aria-labelledby="keys-title">
      <div class="section-head">
        <h2 id="keys-title">API keys</h2>
        <button type="button" class="secondary" onClick={() => refused()}>
          Forget token
        </button>
      </div>
      <ErrorBox error={error} />
      {created && <NewKeySecret created={created} onDone={() => setCreated(null)} />}
      <IssueForm
        token={token}
        onTokenRefused={refused}
        onCreated={(c) => {
          // The list gets the key as the API shows it everywhere else: without the secret.
          const { key: _secret, ...view } = c;
          setKeys((ks) => [...(ks ?? []), view]);
          setCreated(c);
        }}
      />
      <KeyTable token={token} keys={keys} onChanged={replace} onTokenRefused={refused} />
      {hasMore && (
        <button type="button" class="secondary more" onClick={() => load(token, cursor)}>
          Load more keys
        </button>
      )}
    </section>
  );
}

function KeyTable(props: {
  token: string;
  keys: KeyView[];
  onChanged: (v: KeyView) => void;
  onTokenRefused: (e: ApiError) => void;
}) {
  // One key at a time is being edited or asked about: its row grows the editor or the question.
  const [editing, setEditing] = useState<string | null>(null);
  const [confirming, setConfirming] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const now = Date.now() / 1000;

  const revoke = async (id: string) => {
    const r = await revokeKey(props.token, id);
    setConfirming(null);
    if (r.ok) {
      setError(null);
      props.onChanged(r.data);
    } else if (r.status === 401) props.onTokenRefused(r.error);
    else setError(r.error);
  };

  if (!props.keys.length)
    return (
      <p class="empty" id="keys-empty">
        No keys yet: issue one above.
      </p>
    );
  return (
    <>
      <h3 id="keys-list-title">Keys</h3>
      <ErrorBox error={error} />
      <TableWrap labelledBy="keys-list-title" class="data-table key-table">
        <thead>
          <tr>
            <th scope="col">Key</th>
            <th scope="col">Owner</th>
            <th scope="col">Label</th>
            <th scope="col">Models</th>
            <th scope="col">Limits</th>
            <th scope="col">Last used</th>
            <th scope="col">State</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {props.keys.map((k) => {
            const state = stateOf(k, now);
            return [
              <tr key={k.id} data-key-id={k.id} data-state={state}>
                <th scope="row">
                  <span class="key-hint">{k.hint}…</span>
                  <span class="key-meta">{k.id}</span>
                  <span class="key-meta">issued {date(k.created_at, '')}</span>
                </th>
                <td class="owner">{k.owner}</td>
                <td class="label">{k.label ?? '—'}</td>
                <td class="models">{k.models ? k.models.join(', ') : 'All'}</td>
                <td class="limits">
                  <LimitsText limits={k.limits} />
                </td>
                <td class="last-used">{date(k.last_used_at, 'Never')}</td>
                <td>
                  <span class={`chip chip-key-${state}`}>{STATE_TEXT[state]}</span>
                </td>
                <td>
                  {state !== 'revoked' &&
                    (confirming === k.id ? (
                      <span class="confirm">
                        <span>Revoke {k.hint}…? Its requests are refused within a second.</span>
                        <button type="button" class="small danger" onClick={() => revoke(k.id)}>
                          Confirm revoke
                        </button>
                        <button type="button" class="small secondary" onClick={() => setConfirming(null)}>
                          Cancel
                        </button>
                      </span>
                    ) : (
                      <span class="key-actions">
                        <button
                          type="button"
                          class="small secondary"
                          aria-expanded={editing === k.id}
                          aria-label={`Edit limits of ${k.id}`}
                          onClick={() => setEditing(editing === k.id ? null : k.id)}
                        >
                          Edit limits
                        </button>
                        <button
                          type="button"
                          class="small secondary"
                          aria-label={`Revoke ${k.id}`}
                          onClick={() => {
                            setEditing(null);
                            setConfirming(k.id);
                          }}
                        >
                          Revoke
                        </button>
                      </span>
                    ))}
                </td>
              </tr>,
              editing === k.id && (
                <tr key={`${k.id}-edit`} class="key-editor">
                  <td colSpan={8}>
                    <LimitsEditor
                      token={props.token}
                      view={k}
                      onCancel={() => setEditing(null)}
                      onTokenRefused={props.onTokenRefused}
                      onSaved={(v) => {
                        setEditing(null);
                        props.onChanged(v);
                      }}
                    />
                  </td>
                </tr>
              ),
            ];
          })}
        </tbody>
      </TableWrap>
    </>
  );
}
