// The Channels page, for operators: every model's channels as GET /admin/v1/channels reports them
// (state, load, last 5 minutes' outcomes and latency, cool-down, last error), refreshed every few
// seconds. That call takes the operator token, not an API key: the operator pastes it here. It is
// kept in this tab only once Kiln accepted it, and sent only in the Authorization header.
import { useEffect, useState } from 'preact/hooks';
import { clearOperatorToken, loadOperatorToken, saveOperatorToken } from './key.js';
import { adminCall, tokenRefused, TokenForm } from './operator.js';
import { ErrorBox, TableWrap, type ApiError } from './ui.js';

const REFRESH_MS = 5000;

/** One entry of GET /admin/v1/channels (src/channels/admin.ts). */
export interface ChannelHealth {
  model: string;
  kind: string;
  channel: string;
  provider: string;
  priority: number;
  weight: number;
  state: 'closed' | 'open' | 'half_open';
  cooling_until: number | null;
  in_flight: number;
  concurrency: number | null;
  rate_per_second: number | null;
  success_rate: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  calls_5m: Record<string, number>;
  last_error: { code: string; message: string; at: number } | null;
}

const isList = (body: unknown): body is { data: ChannelHealth[] } =>
  Array.isArray((body as { data?: unknown } | null)?.data);

export function ChannelsPanel() {
  // A token from this tab's storage was accepted before; one typed in is kept only once accepted.
  const [token, setToken] = useState<string | null>(() => loadOperatorToken());
  const [rows, setRows] = useState<ChannelHealth[] | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [updated, setUpdated] = useState<number | null>(null);

  useEffect(() => {
    if (!token) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      const r = await adminCall(token, '/admin/v1/channels', isList);
      if (stopped) return;
      if (r.ok) {
        saveOperatorToken(token);
        setRows(r.data.data);
        setUpdated(Date.now());
        setError(null);
      } else if (tokenRefused(r.status)) {
        // The token is wrong (or was rotated): forget it and ask again.
        clearOperatorToken();
        setToken(null);
        setRows(null);
        setError(r.error);
        return;
      } else {
        // Redis or the network is down for a moment: keep the last list, say so, keep trying.
        setError(r.error);
      }
      timer = setTimeout(tick, REFRESH_MS);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [token]);

  const forget = () => {
    clearOperatorToken();
    setToken(null);
    setRows(null);
    setError(null);
  };

  if (!token || !rows)
    return (
      <TokenForm
        title="Channels"
        submitLabel="Show channels"
        checking={!!token}
        error={error}
        onToken={(t) => {
          setError(null);
          setToken(t);
        }}
      >
        The health of every model&apos;s upstream channels. For operators: it needs the operator token.
      </TokenForm>
    );

  const models = [...new Set(rows.map((r) => r.model))];
  return (
    <section class="card channels" aria-labelledby="channels-title">
      <div class="section-head">
        <h2 id="channels-title">Channels</h2>
        <button type="button" class="secondary" onClick={forget}>
          Forget token
        </button>
      </div>
      <p class="hint" id="channels-updated">
        Whole deployment, last 5 minutes. {updated && `Updated ${new Date(updated).toLocaleTimeString()}; `}
        refreshes every {REFRESH_MS / 1000} s.
      </p>
      <ErrorBox error={error} />
      {models.map((m) => (
        <ModelChannels key={m} model={m} rows={rows.filter((r) => r.model === m)} />
      ))}
    </section>
  );
}

const STATE_TEXT: Record<ChannelHealth['state'], string> = {
  closed: 'Closed · healthy',
  open: 'Open · cooling down',
  half_open: 'Half-open · probing',
};

const pct = (r: number | null) => (r === null ? '—' : `${Math.round(r * 1000) / 10} %`);
const msText = (v: number | null) => (v === null ? '—' : v < 10_000 ? `${v} ms` : `${(v / 1000).toFixed(1)} s`);
const clock = (s: number) => new Date(s * 1000).toLocaleTimeString();

function inWords(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

function ModelChannels({ model, rows }: { model: string; rows: ChannelHealth[] }) {
  const id = `channels-${model.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const now = Date.now() / 1000;
  return (
    <div class="model-channels" data-model={model}>
      <h3 id={id}>
        {model} <span class="channel-kind">{rows[0]?.kind}</span>
      </h3>
      <TableWrap labelledBy={id} class="channel-table">
        <thead>
          <tr>
            <th scope="col">Channel</th>
            <th scope="col">State</th>
            <th scope="col">In flight</th>
            <th scope="col">Success</th>
            <th scope="col">p50 / p95</th>
            <th scope="col">Cooling until</th>
            <th scope="col">Last error</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => {
            const calls = Object.values(r.calls_5m).reduce((a, b) => a + b, 0);
            return (
              <tr key={r.channel} data-channel={r.channel} data-state={r.state}>
                <th scope="row">
                  <span class="channel-id">{r.channel}</span>
                  <span class="channel-meta">
                    {r.provider} · priority {r.priority} · weight {r.weight}
                  </span>
                </th>
                <td>
                  <span class={`chip chip-${r.state}`}>{STATE_TEXT[r.state]}</span>
                </td>
                <td class="num in-flight">
                  {r.in_flight} / {r.concurrency ?? '∞'}
                  {r.rate_per_second !== null && <span class="channel-meta">{r.rate_per_second}/s max</span>}
                </td>
                <td class="num success">
                  {pct(r.success_rate)}
                  <span class="channel-meta">
                    {calls} {calls === 1 ? 'call' : 'calls'}
                  </span>
                </td>
                <td class="num latency">
                  {msText(r.p50_ms)} / {msText(r.p95_ms)}
                </td>
                <td class="cooling">
                  {r.cooling_until === null
                    ? '—'
                    : r.cooling_until > now
                      ? `${clock(r.cooling_until)} (in ${inWords(r.cooling_until - now)})`
                      : `ended ${clock(r.cooling_until)}`}
                </td>
                <td class="last-error">
                  {r.last_error ? (
                    <>
                      <code class="error-code">{r.last_error.code}</code> {r.last_error.message}
                      <span class="channel-meta">{clock(r.last_error.at)}</span>
                    </>
                  ) : (
                    '—'
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </TableWrap>
    </div>
  );
}
