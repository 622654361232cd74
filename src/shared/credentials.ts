// Which key a call to an upstream (a model's channel) carries: one rule for image, video and chat.
// Pure module: safe to value-import from workflow code.

/** A channel's `credential` setting (see src/config/models.ts). */
export type CredentialSetting = 'passthrough' | 'none' | { env: string };

interface Credentialed {
  credential: CredentialSetting;
}

/** The configured keys of `channels` (`credential: {env}`), read from `env` once, by variable name. */
export function configuredKeys(
  channels: readonly Credentialed[],
  env: Record<string, string | undefined>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const c of channels) {
    const name = typeof c.credential === 'object' ? c.credential.env : undefined;
    if (name && env[name]) out[name] = env[name];
  }
  return out;
}

/**
 * The key sent upstream: the caller's own for `passthrough`, the configured one (by its variable's
 * name) for `{env}`, none for `none`.
 */
export function upstreamKey(
  upstream: Credentialed,
  callerKey: string | undefined,
  configured: Record<string, string> | undefined,
): string | undefined {
  if (upstream.credential === 'passthrough') return callerKey;
  return typeof upstream.credential === 'object' ? configured?.[upstream.credential.env] : undefined;
}
