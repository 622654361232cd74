// Which key a call to a model's upstream carries: one rule for image, video and chat models.
// Pure module: safe to value-import from workflow code.

/** A model's `credential` setting (see src/config.ts). */
export type CredentialSetting = 'passthrough' | 'none' | { env: string };

interface Credentialed {
  id: string;
  credential: CredentialSetting;
}

/** The key a `credential: {env}` model is configured with, read from `env`. */
export function configuredKeyOf(model: Credentialed, env: Record<string, string | undefined>): string | undefined {
  return typeof model.credential === 'object' ? env[model.credential.env] : undefined;
}

/**
 * The key sent upstream: the caller's own for `passthrough`, the configured one (looked up by model
 * id) for `{env}`, none for `none`.
 */
export function upstreamKey(
  model: Credentialed,
  callerKey: string | undefined,
  configuredKey: (modelId: string) => string | undefined,
): string | undefined {
  if (model.credential === 'passthrough') return callerKey;
  return typeof model.credential === 'object' ? configuredKey(model.id) : undefined;
}
