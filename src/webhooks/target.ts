// The webhook parameters of a submit (`?webhook=` and `?webhook_events=` on generateContent, the
// `webhook` and `webhook_events` fields of POST /v1/videos), checked before a workflow exists.
import ipaddr from 'ipaddr.js';
import { KilnError } from '../shared/errors.js';
import { WEBHOOK_EVENTS, type WebhookEvents, type WebhookTarget } from '../shared/webhook-types.js';
import { refusedAddress } from '../infra/safe-fetch.js';

export const WEBHOOK_URL_MAX = 2048;

const bad = (why: string) => new KilnError('invalid_webhook_url', `webhook ${why}.`);

/**
 * The target of a submit's webhook parameters, undefined when none was given. The URL must be an
 * absolute https URL of at most 2048 characters without credentials; a literal address must be
 * public unicast (a host name is checked again at every delivery, against the address connected
 * to). `allow` exempts addresses as the delivery's guard does (test-only).
 */
export function webhookTarget(url: unknown, events: unknown, allow: string[] = []): WebhookTarget | undefined {
  if (Array.isArray(url)) throw bad('is given more than once; send one URL');
  if (Array.isArray(events)) throw new KilnError('invalid_request', 'webhook_events is given more than once.');
  if (events !== undefined && !(WEBHOOK_EVENTS as readonly unknown[]).includes(events))
    throw new KilnError('invalid_request', `webhook_events must be "terminal" (the default) or "all".`);
  if (url === undefined || url === null) {
    if (events !== undefined) throw new KilnError('invalid_request', 'webhook_events needs a webhook URL.');
    return undefined;
  }
  if (typeof url !== 'string') throw bad('must be a string (an absolute https URL)');
  if (url.length > WEBHOOK_URL_MAX)
    throw bad(`is ${url.length} characters long; at most ${WEBHOOK_URL_MAX} are allowed`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw bad('must be an absolute https URL');
  }
  if (parsed.protocol !== 'https:') throw bad(`must use https, not ${parsed.protocol.replace(/:$/, '')}`);
  if (parsed.username || parsed.password)
    throw bad('must not carry credentials (user:password@); sign-in is by signature');
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  if (ipaddr.isValid(host)) {
    const why = refusedAddress(host, allow);
    if (why) throw bad(`points at a ${why} (${host}); deliveries go to public addresses only`);
  }
  return { url, events: (events as WebhookEvents | undefined) ?? 'terminal' };
}
