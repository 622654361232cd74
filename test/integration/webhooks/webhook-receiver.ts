// A real HTTPS webhook receiver for tests: listens on 127.0.0.2 (standing in for a public host; the
// tests exempt only that address with WEBHOOK_ALLOW) with a self-signed certificate that the worker
// trusts through WEBHOOK_CA_FILE. It records every request and answers from a script.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { inject } from 'vitest';

// Test-only key pair (P-256, valid until 2126) for IP 127.0.0.2 and receiver.test. Never used
// outside tests.
const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg+9CV9PBWo/VfjhZ5
xxlG9It0sIQYRbSQBRveU9dPQ12hRANCAAQyIldxAQIpGmaIQadbruuOSoGLuFUQ
C25LzA8hCUn4d0pvG2rVp4SMVr+6kXiholGb2LYRPeuBEEfcsFL3GHhN
-----END PRIVATE KEY-----
`;
const CERT = `-----BEGIN CERTIFICATE-----
MIIBwTCCAWegAwIBAgIUOZBBFUpt79frLP9L7S0INvK28CgwCgYIKoZIzj0EAwIw
JTEjMCEGA1UEAwwaa2lsbi10ZXN0LXdlYmhvb2stcmVjZWl2ZXIwIBcNMjYxMTIz
MTczNTQ0WhgPMjEyNjEwMzAxNzM1NDRaMCUxIzAhBgNVBAMMGmtpbG4tdGVzdC13
ZWJob29rLXJlY2VpdmVyMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEMiJXcQEC
KRpmiEGnW67rjkqBi7hVEAtuS8wPIQlJ+HdKbxtq1aeEjFa/upF4oaJRm9i2ET3r
gRBH3LBS9xh4TaNzMHEwHQYDVR0OBBYEFBQ9lqv3oQFRXw8N6p6ysxMrVRGtMB8G
A1UdIwQYMBaAFBQ9lqv3oQFRXw8N6p6ysxMrVRGtMA8GA1UdEwEB/wQFMAMBAf8w
HgYDVR0RBBcwFYcEfwAAAoINcmVjZWl2ZXIudGVzdDAKBggqhkjOPQQDAgNIADBF
AiEAyvzH5XWtE8ZTGKotznVlcXmHP9nCydmH+qYLyYpzwrsCIBfuoylfJflIvNfu
Qy/2jXSzRpQcODksCkIl9KXK0JB4
-----END CERTIFICATE-----
`;

/** The address receivers listen on: loopback, exempted in tests as if it were public. */
export const RECEIVER_HOST = '127.0.0.2';

/** Writes the receivers' certificate into `dir` and returns the path, for WEBHOOK_CA_FILE. */
export function receiverCaFile(dir: string): string {
  const file = join(dir, 'webhook-ca.pem');
  writeFileSync(file, CERT);
  return file;
}

/** Models of the webhook tests: quick local renderers, one of each form. */
export const WEBHOOK_MODELS = [
  { id: 'kiln-image-1', provider: 'local', latencyMs: 300, idempotent: true },
  { id: 'kiln-image-direct', provider: 'local', latencyMs: 100, idempotent: true, form: 'direct' },
  {
    id: 'kiln-video-1',
    kind: 'video',
    provider: 'local',
    idempotent: true,
    latencyMs: 600,
    pollIntervalMs: 200,
    seconds: ['4'],
  },
];

/** Kiln settings that let deliveries reach the receivers (and retry quickly). */
export function webhookEnv(): Record<string, string> {
  return {
    WEBHOOK_ALLOW: RECEIVER_HOST,
    WEBHOOK_CA_FILE: receiverCaFile(mkdtempSync(join(inject('tmpRoot'), 'webhook-ca-'))),
    WEBHOOK_RETRY_INITIAL_MS: '200',
    WEBHOOK_RETRY_MAX_MS: '1000',
  };
}

/** An image submit (task form) with these query parameters besides output=url. */
export const submitPath = (query: Record<string, string>) =>
  `/v1beta/models/kiln-image-1:generateContent?${new URLSearchParams({ output: 'url', ...query })}`;

/** The task a delivery carries; throws unless it has a valid Standard Webhooks signature for `secret`. */
export const verify = (secret: string, r: Received) => new Webhook(secret).verify(r.body, r.headers);

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  /** What the receiver answered. */
  status: number;
  at: number;
}

export interface Receiver {
  url: (path?: string) => string;
  received: Received[];
  /** Statuses to answer with, in order, before answering `fallback` (200 by default). */
  script: number[];
  fallback: number;
  /** Resolves once `n` requests have come in (or rejects after `timeoutMs`). */
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  let waiters: (() => void)[] = [];
  const r = { script: [] as number[], fallback: 200 };
  const server: Server = createServer({ key: KEY, cert: CERT }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = r.script.shift() ?? r.fallback;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      received.push({ path: req.url ?? '', headers, body: Buffer.concat(chunks).toString(), status, at: Date.now() });
      res.writeHead(status, { 'content-type': 'text/plain' }).end(`answered ${status}`);
      for (const w of waiters) w();
    });
  });
  await new Promise<void>((ok) => server.listen(0, RECEIVER_HOST, ok));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path = '/hook') => `https://${RECEIVER_HOST}:${port}${path}`,
    received,
    get script() {
      return r.script;
    },
    set script(v: number[]) {
      r.script = v;
    },
    get fallback() {
      return r.fallback;
    },
    set fallback(v: number) {
      r.fallback = v;
    },
    waitFor(n, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (received.length < n) return false;
          clearTimeout(timer);
          waiters = waiters.filter((w) => w !== onRequest);
          resolve(received.slice());
          return true;
        };
        const onRequest = () => void check();
        const timer = setTimeout(
          () => reject(new Error(`receiver got ${received.length} of ${n} requests in ${timeoutMs} ms`)),
          timeoutMs,
        );
        if (!check()) waiters.push(onRequest);
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise((ok) => server.close(() => ok(undefined)));
    },
  };
}
