// One declaration per operation: the route the router mounts, the schemas its input is validated
// with, and its OpenAPI description. The app mounts a list of these and /openapi.json is built from
// the same list, so a route cannot be served undocumented, nor documented with rules it does not
// enforce.
import type Router from '@koa/router';
import type { RouterContext } from '@koa/router';
import type { z } from 'zod';
import type { Authenticator, Caller } from '../infra/callers.js';
import { currentRequest } from '../ops/request-context.js';
import { KilnError } from '../shared/errors.js';
import { jsonBody } from './body.js';
import type { OperationDoc } from './openapi.js';

type Part = 'params' | 'query' | 'body';

export type RouteRequest = NonNullable<OperationDoc['request']> & {
  /**
   * Parts the handler reads and checks itself, so their schemas only document them: bodies with
   * their own reader or messages (multipart, per-model limits, the contract's error codes), and
   * values whose refusal the service words.
   */
  checkedByHandler?: readonly Part[];
};

export interface RouteSpec extends OperationDoc {
  request?: RouteRequest;
  /** Where an `auth: true` route reads the caller's key; the Authorization header unless given. */
  credentials?: (ctx: RouterContext) => string | undefined;
}

type Parsed<R extends RouteRequest, K extends Part> = R[K] extends z.ZodType
  ? R extends { checkedByHandler: readonly (infer C)[] }
    ? K extends C
      ? undefined
      : z.output<R[K]>
    : z.output<R[K]>
  : undefined;

/** What the mounting layer hands a handler: the authenticated caller and the parsed input. */
export interface RouteInput<R extends RouteRequest, A extends RouteSpec['auth']> {
  /** Set on `auth: true` routes (the default): authentication runs before any input is read. */
  caller: A extends true ? Caller : undefined;
  params: Parsed<R, 'params'>;
  query: Parsed<R, 'query'>;
  body: Parsed<R, 'body'>;
}

export interface RouteDef extends RouteSpec {
  handler(ctx: RouterContext, input: { caller?: Caller; params?: unknown; query?: unknown; body?: unknown }): unknown;
}

/** Declares one operation; the handler's input is typed from the declared schemas and auth. */
export function route<R extends RouteRequest = Record<never, never>, A extends RouteSpec['auth'] = true>(
  def: Omit<RouteSpec, 'request' | 'auth'> & {
    request?: R;
    auth?: A;
    handler(ctx: RouterContext, input: RouteInput<R, A>): unknown;
  },
): RouteDef {
  return def;
}

/** The first issue as `<where>.<path>: <message>`, the form every validation error takes. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const i = r.error.issues[0];
  const path = i.path.length ? `${where}.${i.path.join('.')}` : where;
  throw new KilnError('invalid_request', `${path}: ${i.message}`);
}

/**
 * The route template that served the request (`/v1/tasks/:id`), for logs and metrics; set by the
 * routes `mountRoutes` mounts (the router's own record of it is internal to it).
 */
export const routeOf = (ctx: { state: Record<string, unknown> }): string =>
  typeof ctx.state.route === 'string' ? ctx.state.route : '(unmatched)';

/** Mounts each route: authenticate, then validate params, query and (JSON) body, then the handler. */
export function mountRoutes(router: Router, routes: readonly RouteDef[], auth: Authenticator): void {
  const seen = new Set<string>();
  for (const def of routes) {
    // A second declaration would be documented twice and never served.
    const key = `${def.method} ${def.route}`;
    if (seen.has(key)) throw new Error(`Route declared twice: ${key}`);
    seen.add(key);
    const own = new Set(def.request?.checkedByHandler);
    const schema = (part: Part) => (own.has(part) ? undefined : def.request?.[part]);
    const [params, query, body] = [schema('params'), schema('query'), schema('body')];
    router.register(def.route, [def.method], async (ctx) => {
      ctx.state.route = def.route;
      // A task named by the path is on the request's log lines from here on, errors included.
      const named = (ctx.params as Record<string, string | undefined>).id;
      const rc = currentRequest();
      if (rc && named?.startsWith('task_')) rc.taskId ??= named;
      // Authentication comes first: an unauthenticated caller learns nothing about input rules.
      const caller =
        (def.auth ?? true) === true
          ? await auth.authenticate((def.credentials ? def.credentials(ctx) : ctx.get('authorization')) || undefined)
          : undefined;
      const input = {
        caller,
        params: params && parseInput(params, ctx.params, 'params'),
        query: query && parseInput(query, ctx.query, 'query'),
        body: undefined as unknown,
      };
      if (body) {
        await jsonBody()(ctx, async () => undefined);
        input.body = parseInput(body, ctx.request.body, 'body');
      }
      await def.handler(ctx, input);
    });
  }
}
