// Remote codec server for the Temporal Web UI and CLI: POST {endpoint}/decode and /encode with
// `{payloads: [{metadata: {k: base64}, data: base64}]}`, as Temporal's codec protocol defines.
// Decoding shows operators encrypted payloads, which may hold a caller's key: it is off unless
// KILN_OPERATOR_TOKEN is set, and every call must carry that token. The CLI sends it as
// `--codec-auth 'Bearer <token>'`; the Web UI cannot add headers, so its endpoint carries the
// token in the path (`{api}/codec/t/<token>`), which Kiln's logs and metrics never record (they
// use route templates).
import cors from '@koa/cors';
import type { Context, Middleware } from 'koa';
import { koaBody } from 'koa-body';
import { z } from 'zod';
import type { Payload, PayloadCodec } from '@temporalio/common';
import { KilnError } from '../shared/errors.js';
import { requireOperator } from '../http/operator-token.js';
import { route, type RouteDef, type RouteSpec } from '../http/route-table.js';

export interface CodecDeps {
  codec: PayloadCodec;
  operatorToken?: string;
  corsOrigins: string[];
}

const b64 = z
  .string()
  .max(8 * 1024 * 1024)
  .regex(/^[A-Za-z0-9+/=_-]*$/, 'must be base64');
const Payloads = z
  .object({
    payloads: z.array(z.object({ metadata: z.record(z.string(), b64).optional(), data: b64.optional() })).max(10_000),
  })
  .meta({ id: 'CodecPayloads' });

const toPayload = (p: z.infer<typeof Payloads>['payloads'][number]): Payload => ({
  metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
  data: Buffer.from(p.data ?? '', 'base64'),
});
const fromPayload = (p: Payload) => ({
  metadata: Object.fromEntries(
    Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v ?? new Uint8Array()).toString('base64')]),
  ),
  data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
});

/** CORS for the codec paths only, before routing, so preflight OPTIONS requests get their answer. */
export function codecCors(origins: string[]): Middleware {
  const allowed = new Set(origins);
  const handler = cors({
    origin: (ctx) => (allowed.has(ctx.get('origin')) ? ctx.get('origin') : ''),
    allowMethods: ['POST'],
    allowHeaders: ['content-type', 'x-namespace', 'authorization'],
    credentials: true,
    maxAge: 600,
  });
  return (ctx, next) => (ctx.path.startsWith('/codec/') ? handler(ctx, next) : next());
}

/** The four codec routes: decode and encode, with the token in the Authorization header or the path. */
export function codecRoutes({ codec, operatorToken }: CodecDeps): RouteDef[] {
  const parse = koaBody({
    json: true,
    jsonStrict: true,
    jsonLimit: '12mb',
    multipart: false,
    urlencoded: false,
    text: false,
  });

  const handle = async (ctx: Context, op: 'encode' | 'decode', pathToken: string | undefined) => {
    requireOperator(ctx, operatorToken, 'The codec endpoints', pathToken);
    if (!ctx.is('application/json'))
      throw new KilnError('unsupported_media_type', 'Send the body as Content-Type: application/json.');
    await parse(ctx, async () => undefined);
    const parsed = Payloads.safeParse(ctx.request.body);
    if (!parsed.success)
      throw new KilnError(
        'invalid_request',
        `Invalid payloads: ${parsed.error.issues[0].path.join('.')}: ${parsed.error.issues[0].message}`,
      );
    const input = parsed.data.payloads.map(toPayload);
    let out: Payload[];
    try {
      out = op === 'decode' ? await codec.decode(input) : await codec.encode(input);
    } catch (err) {
      throw new KilnError('invalid_request', `The payloads could not be ${op}d: ${(err as Error).message}`);
    }
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { payloads: out.map(fromPayload) };
  };

  const declare = (op: 'encode' | 'decode', inPath: boolean) => {
    const Op = op === 'decode' ? 'Decode' : 'Encode';
    const doc: Pick<RouteSpec, 'method' | 'operationId' | 'tags' | 'summary' | 'responses' | 'errors'> = {
      method: 'post',
      operationId: `codec${Op}${inPath ? 'PathToken' : ''}`,
      tags: ['operations'],
      summary:
        `${op === 'decode' ? 'Decrypt' : 'Encrypt'} Temporal payloads (remote ` +
        `codec protocol)${inPath ? ', token in the path (for the Web UI)' : ''}`,
      responses: { 200: { description: 'The payloads, in the same order', schema: Payloads } },
      errors: [
        'invalid_request',
        'not_found',
        ...(inPath ? (['missing_api_key'] as const) : []),
        'request_too_large',
        'unsupported_media_type',
      ],
    };
    // The handler checks the token (the endpoints answer not_found while it is unset) before it
    // reads the body, with its own size limit and message.
    return inPath
      ? route({
          ...doc,
          route: `/codec/t/:token/${op}`,
          auth: false,
          request: { params: z.object({ token: z.string() }), body: Payloads, checkedByHandler: ['body'] },
          handler: (ctx, { params }) => handle(ctx, op, params.token),
        })
      : route({
          ...doc,
          route: `/codec/${op}`,
          auth: 'operator',
          request: { body: Payloads, checkedByHandler: ['body'] },
          handler: (ctx) => handle(ctx, op, undefined),
        });
  };

  return [declare('decode', false), declare('encode', false), declare('decode', true), declare('encode', true)];
}
