// What the operator pages (Channels, Keys) share: the admin calls, which take the operator token
// (KILN_OPERATOR_TOKEN) rather than an API key, so they go through fetch here instead of Kiln's
// client; their refusals in words an operator can act on; and the form where the token is pasted.
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { SecretField, type ApiError } from './ui.js';

export type AdminAnswer<T> = { ok: true; data: T } | { ok: false; status: number; error: ApiError };

/** What a refusal means here: 401 and 404 say what to do about the token or the deployment. */
export function refusal(status: number, body: { error?: ApiError } | null): ApiError {
  if (status === 401)
    return {
      code: body?.error?.code ?? 'missing_api_key',
      message:
        'Kiln refused this token: it is not the operator token (KILN_OPERATOR_TOKEN) of this Kiln. ' +
        'An API key does not open this page.',
    };
  // An unset operator token and keys-only pages in passthrough mode are both 404: the API's own words
  // say which (see src/http/operator-token.ts and src/keys/routes.ts).
  if (status === 404 && !body?.error?.message)
    return {
      code: 'not_found',
      message: 'The admin endpoints are off on this Kiln: its operator has not set KILN_OPERATOR_TOKEN.',
    };
  return body?.error ?? { code: `http_${status}`, message: `Kiln answered HTTP ${status}.` };
}

/**
 * One admin call with the token in the Authorization header (never in the URL), never cached;
 * `accept` checks the answer's shape. A network failure is status 0.
 */
export async function adminCall<T>(
  token: string,
  path: string,
  accept: (body: unknown) => body is T,
  init: { method?: string; json?: unknown } = {},
): Promise<AdminAnswer<T>> {
  try {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (init.json !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(path, {
      method: init.method ?? 'GET',
      headers,
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
      cache: 'no-store',
    });
    const body = await res.json().catch(() => null);
    if (res.ok && accept(body)) return { ok: true, data: body };
    return { ok: false, status: res.status, error: refusal(res.status, body) };
  } catch (err) {
    return { ok: false, status: 0, error: { code: 'network_error', message: (err as Error).message } };
  }
}

/** 401 and 404 mean the token is wrong, rotated or useless here: the page forgets it and asks again. */
export const tokenRefused = (status: number) => status === 401 || status === 404;

/** The form an operator pastes the token into; the page keeps it only once Kiln accepted it. */
export function TokenForm(props: {
  title: string;
  children: ComponentChildren;
  submitLabel: string;
  checking: boolean;
  error: ApiError | null;
  onToken: (t: string) => void;
}) {
  const [value, setValue] = useState('');
  const submit = (e: Event) => {
    e.preventDefault();
    if (value.trim()) props.onToken(value.trim());
  };
  return (
    <form class="card signin" onSubmit={submit} aria-labelledby="operator-title">
      <h2 id="operator-title">{props.title}</h2>
      <p class="hint">{props.children}</p>
      <SecretField
        id="operator-token"
        label="Operator token"
        error={props.error}
        value={value}
        placeholder="Paste KILN_OPERATOR_TOKEN"
        onInput={setValue}
      />
      <p class="hint">
        Kept in this tab only (session storage) once Kiln accepts it; sent only to this Kiln, in a header.
      </p>
      <button type="submit" id="operator-submit" disabled={props.checking || !value.trim()}>
        {props.checking ? 'Checking…' : props.submitLabel}
      </button>
    </form>
  );
}
