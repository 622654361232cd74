// Kiln Console: sign in with an API key, create image, video and workflow-node tasks, watch them
// finish, see the results; a chat playground; the key's usage; and for operators the channels'
// health and the API keys (with the operator token, also reachable without an API key at #channels
// and #keys). All API calls go to this page's origin only, through Kiln's own client but for the
// admin calls.
import { useEffect, useMemo, useState } from 'preact/hooks';
import { AuthenticationError, Kiln } from '../../src/client/index.js';
import { ChannelsPanel } from './channels.js';
import { ChatPanel } from './chat.js';
import { clearKey, clearOperatorToken, loadKey, saveKey } from './key.js';
import { KeysPanel } from './keys.js';
import { SecretField, describeError, type ApiError } from './ui.js';
import { UsagePanel } from './usage.js';
import { Workspace, type FormKind } from './workspace.js';

type Tab = FormKind | 'chat' | 'usage' | OperatorTab;
/** The pages that take the operator token, not an API key: they open signed in or not. */
type OperatorTab = 'channels' | 'keys';
const TABS: { id: Tab; label: string }[] = [
  { id: 'image', label: 'Images' },
  { id: 'video', label: 'Video' },
  { id: 'node', label: 'Workflow' },
  { id: 'chat', label: 'Chat' },
  { id: 'usage', label: 'Usage' },
  { id: 'channels', label: 'Channels' },
  { id: 'keys', label: 'Keys' },
];
const isOperator = (tab: Tab): tab is OperatorTab => tab === 'channels' || tab === 'keys';
const isForm = (tab: Tab): tab is FormKind => tab === 'image' || tab === 'video' || tab === 'node';
/** The pages that are not a create form: the workspace stays mounted, hidden, under them. */
const formOf = (tab: Tab): FormKind => (isForm(tab) ? tab : 'image');
/** A bookmark (/console/#keys, #usage, …) opens that page; #usage waits for the sign-in. */
const tabOfHash = (): Tab => TABS.find((t) => `#${t.id}` === location.hash)?.id ?? 'image';

function OperatorPage({ tab }: { tab: OperatorTab }) {
  return tab === 'channels' ? <ChannelsPanel /> : <KeysPanel />;
}

/** What the page learns from /console/config.json (the CSP rules out inline data). */
function useSettings(): { temporalUrl: string | null; publicBaseUrl: string | null } {
  const [settings, setSettings] = useState<{ temporalUrl: string | null; publicBaseUrl: string | null }>({
    temporalUrl: null,
    publicBaseUrl: null,
  });
  useEffect(() => {
    fetch('/console/config.json')
      .then((r) => (r.ok ? r.json() : null))
      .then((s: { temporal_workflow_url?: string | null; public_base_url?: string | null } | null) =>
        setSettings({ temporalUrl: s?.temporal_workflow_url ?? null, publicBaseUrl: s?.public_base_url ?? null }),
      )
      .catch(() => undefined);
  }, []);
  return settings;
}

export function App() {
  const [key, setKey] = useState<string | null>(() => loadKey());
  const client = useMemo(
    () => (key ? new Kiln({ baseURL: location.origin, apiKey: key, maxRetries: 1 }) : null),
    [key],
  );
  const { temporalUrl, publicBaseUrl } = useSettings();
  // An operator's bookmark (/console/#channels, #keys) opens that page, signed in or not.
  const [tab, setTab] = useState<Tab>(tabOfHash);
  const signOut = () => {
    setTab('image');
    clearKey();
    clearOperatorToken();
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
        {client ? (
          <button type="button" class="secondary" onClick={signOut}>
            Sign out
          </button>
        ) : (
          isOperator(tab) && (
            <button type="button" class="secondary" onClick={() => setTab('image')}>
              Sign in
            </button>
          )
        )}
      </header>
      <main>
        {client ? (
          <>
            <nav class="tabs" aria-label="Sections">
              {TABS.map((t) => (
                <button
                  key={t.id}
                  type="button"
                  id={`tab-${t.id}`}
                  class={tab === t.id ? 'tab active' : 'tab'}
                  aria-current={tab === t.id ? 'page' : undefined}
                  onClick={() => setTab(t.id)}
                >
                  {t.label}
                </button>
              ))}
            </nav>
            {/* Kept mounted under the chat: the list keeps following its tasks. */}
            <div hidden={!isForm(tab)}>
              <Workspace
                client={client}
                form={formOf(tab)}
                temporalUrl={temporalUrl}
                publicBaseUrl={publicBaseUrl}
                onUnauthorized={signOut}
              />
            </div>
            {tab === 'chat' && <ChatPanel client={client} onUnauthorized={signOut} />}
            {tab === 'usage' && <UsagePanel client={client} onUnauthorized={signOut} />}
            {isOperator(tab) && <OperatorPage tab={tab} />}
          </>
        ) : isOperator(tab) ? (
          <OperatorPage tab={tab} />
        ) : (
          <>
            <SignIn
              onSignIn={(k, remember) => {
                saveKey(k, remember);
                setKey(k);
              }}
            />
            <p class="operator-link">
              Operators:{' '}
              <button type="button" class="link" id="open-channels" onClick={() => setTab('channels')}>
                channel health
              </button>{' '}
              ·{' '}
              <button type="button" class="link" id="open-keys" onClick={() => setTab('keys')}>
                API keys
              </button>
            </p>
          </>
        )}
      </main>
    </>
  );
}

/** A refused key in plain words: which key problem it is, and what to do. */
function keyProblem(err: AuthenticationError): ApiError {
  if (err.code === 'invalid_api_key')
    return {
      code: err.code,
      message:
        'This key is not valid on this Kiln: it is unknown or has been revoked. ' +
        'Check that you pasted the whole key, or ask the operator for a new one.',
    };
  if (err.code === 'missing_api_key')
    return {
      code: err.code,
      message: 'This does not look like a Kiln API key (too long, or it has spaces or other odd characters).',
    };
  return { code: err.code, message: 'Kiln does not accept this key: it is wrong, revoked, or for another server.' };
}

function SignIn({ onSignIn }: { onSignIn: (key: string, remember: boolean) => void }) {
  const [value, setValue] = useState('');
  const [remember, setRemember] = useState(false);
  const [checking, setChecking] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
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
      setError(err instanceof AuthenticationError ? keyProblem(err) : describeError(err));
    } finally {
      setChecking(false);
    }
  };
  return (
    <form class="card signin" onSubmit={submit} aria-labelledby="signin-title">
      <h2 id="signin-title">Sign in</h2>
      <SecretField
        id="api-key"
        label="API key"
        error={error}
        value={value}
        placeholder="Paste your Kiln API key"
        onInput={(v) => {
          setValue(v);
          setError(null);
        }}
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
    </form>
  );
}
