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
