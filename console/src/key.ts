// Where the API key lives in the browser: sessionStorage (gone when the tab closes), and also
// localStorage only when the user ticks "remember on this device". Never in a URL: the client sends
// it as an Authorization header.
const SLOT = 'kiln.console.apiKey';

export function loadKey(): string | null {
  return sessionStorage.getItem(SLOT) ?? localStorage.getItem(SLOT);
}

export function saveKey(key: string, remember: boolean): void {
  sessionStorage.setItem(SLOT, key);
  if (remember) localStorage.setItem(SLOT, key);
  else localStorage.removeItem(SLOT);
}

export function clearKey(): void {
  sessionStorage.removeItem(SLOT);
  localStorage.removeItem(SLOT);
}

// The operator token (KILN_OPERATOR_TOKEN) of the Channels page: a deployment-wide secret, so it is
// kept in this tab only (sessionStorage), never in localStorage, whatever "remember" says.
const OPERATOR_SLOT = 'kiln.console.operatorToken';

export function loadOperatorToken(): string | null {
  return sessionStorage.getItem(OPERATOR_SLOT);
}

export function saveOperatorToken(token: string): void {
  sessionStorage.setItem(OPERATOR_SLOT, token);
}

export function clearOperatorToken(): void {
  sessionStorage.removeItem(OPERATOR_SLOT);
}
