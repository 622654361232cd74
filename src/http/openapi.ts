// The OpenAPI 3.1 document, generated from the operations the app mounts (route-table.ts): the
// zod schemas in each declaration are the ones its input is validated with.
import { OpenAPIRegistry, OpenApiGeneratorV31, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { ERROR_STATUS, TASK_FAILURE_CODES, type ErrorCode } from '../shared/errors.js';

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type ZodObj = z.ZodObject<z.ZodRawShape>;

export interface ResponseDoc {
  description: string;
  schema?: z.ZodType;
  /** Default application/json when a schema is given; several when the answer's type varies (files). */
  contentType?: string | string[];
  /** Further content types with their own schema (e.g. a streamed variant of a JSON answer). */
  alternatives?: Record<string, z.ZodType>;
  headers?: Record<string, { description: string; schema: { type: 'string' | 'integer' } }>;
  /** OpenAPI links: how a value of this answer feeds another operation (clients and stateful fuzzing follow them). */
  links?: Record<
    string,
    { operationId: string; description?: string; parameters?: Record<string, string>; requestBody?: unknown }
  >;
}

export interface OperationDoc {
  method: Method;
  /** The Koa route exactly as the router has it, e.g. `/v1/tasks/:id`. */
  route: string;
  /** The OpenAPI path, when it is not the Koa route with `:x` written `{x}`. */
  path?: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** Whether `Authorization: Bearer` is required (default true). */
  auth?: boolean | 'operator';
  request?: { params?: ZodObj; query?: z.ZodType; body?: z.ZodType; bodyContentType?: string; headers?: ZodObj };
  responses: Record<number, ResponseDoc>;
  /** Error codes this operation can answer with; statuses come from the one error catalogue. */
  errors?: ErrorCode[];
  /**
   * The error body of one status (given its codes) when the operation does not answer in Kiln's
   * `{error: {code, message}}`: the Gemini video and batch endpoints answer in Google's shape.
   */
  errorBody?: (codes: ErrorCode[]) => z.ZodType;
}

export const openApiPath = (op: Pick<OperationDoc, 'route' | 'path'>) =>
  op.path ?? op.route.replace(/:([A-Za-z0-9_]+)/g, '{$1}');

/** Every error code with its HTTP status; the codes a task can end with are also named apart. */
const ERROR_CODE_COMPONENT = {
  type: 'string' as const,
  enum: Object.keys(ERROR_STATUS),
  description:
    Object.entries(ERROR_STATUS)
      .map(([c, s]) => `\`${c}\`: HTTP ${s}`)
      .join('; ') +
    `. Codes a task can end with (error.code of a failed task; chat completions answer ` +
    `them synchronously with the status above): ${TASK_FAILURE_CODES.join(', ')}.`,
};

const errorBody = (codes: ErrorCode[]) =>
  z.object({
    error: z.object({ code: z.enum(codes as [ErrorCode, ...ErrorCode[]]), message: z.string() }),
  });

const RETRY_AFTER = {
  description: 'Seconds to wait before retrying (whole seconds).',
  schema: { type: 'integer' as const },
};
const REQUEST_ID = {
  description: "The request id: the caller's X-Request-Id when it is sane, else a generated one.",
  schema: { type: 'string' as const },
};

function toRouteConfig(op: OperationDoc): RouteConfig {
  const auth = op.auth ?? true;
  const codes = new Set<ErrorCode>(op.errors ?? []);
  if (auth === true) codes.add('missing_api_key').add('invalid_api_key');
  // Wherever a caller names a model, a key restricted to other models (keys mode) is refused.
  if (auth === true && codes.has('model_not_found')) codes.add('model_not_allowed');
  if (auth === 'operator') codes.add('missing_api_key');
  codes.add('internal_error');
  const responses: RouteConfig['responses'] = {};
  for (const [status, r] of Object.entries(op.responses)) {
    responses[status] = {
      description: r.description,
      headers: { 'X-Request-Id': REQUEST_ID, ...(r.headers ?? {}) },
      ...(r.schema
        ? {
            content: Object.fromEntries([
              ...[r.contentType ?? 'application/json'].flat().map((t) => [t, { schema: r.schema! }] as const),
              ...Object.entries(r.alternatives ?? {}).map(([t, schema]) => [t, { schema }] as const),
            ]),
          }
        : {}),
      ...(r.links ? { links: r.links } : {}),
    };
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const c of codes) byStatus.set(ERROR_STATUS[c], [...(byStatus.get(ERROR_STATUS[c]) ?? []), c]);
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    const retry = list.some(
      (c) =>
        c === 'rate_limited' ||
        c === 'upstream_rate_limited' ||
        c === 'queue_full' ||
        c === 'service_unavailable' ||
        c === 'task_not_ready',
    );
    responses[String(status)] = {
      description: `Error: ${list.map((c) => `\`${c}\``).join(', ')}`,
      headers: { 'X-Request-Id': REQUEST_ID, ...(retry ? { 'Retry-After': RETRY_AFTER } : {}) },
      content: { 'application/json': { schema: (op.errorBody ?? errorBody)(list) } },
    };
  }
  const body = op.request?.body;
  return {
    method: op.method,
    path: openApiPath(op),
    operationId: op.operationId,
    // Where the OpenAPI path cannot be written as the Koa route (a parameter covering `{model}:action`).
    ...(op.path ? { 'x-koa-route': op.route } : {}),
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    tags: op.tags,
    security: auth === false ? [] : auth === 'operator' ? [{ operatorToken: [] }] : [{ bearerAuth: [] }],
    request: {
      ...(op.request?.params ? { params: op.request.params } : {}),
      ...(op.request?.query ? { query: op.request.query as ZodObj } : {}),
      ...(op.request?.headers ? { headers: op.request.headers } : {}),
      ...(body
        ? {
            body: {
              required: true,
              content: { [op.request?.bodyContentType ?? 'application/json']: { schema: body } },
            },
          }
        : {}),
    },
    responses,
  };
}

/** `more` adds what no operation declares (the webhook deliveries a receiver gets). */
export function buildOpenApiDocument(
  operations: readonly OperationDoc[],
  opts: { serverUrl?: string; version?: string; more?: (registry: OpenAPIRegistry) => void } = {},
) {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    description:
      'Authorization: Bearer <API_KEY>. In passthrough mode any ' +
      'well-formed key; in keys mode a key issued by `npm run keys`.',
  });
  registry.registerComponent('securitySchemes', 'operatorToken', {
    type: 'http',
    scheme: 'bearer',
    description: 'The operator token (KILN_OPERATOR_TOKEN); endpoints are off when it is unset.',
  });
  registry.registerComponent('schemas', 'ErrorCode', ERROR_CODE_COMPONENT);
  // Answers to a request no operation takes, so they belong to no operation.
  for (const [name, code, why] of [
    ['NotFound', 'not_found', 'no such path'],
    ['MethodNotAllowed', 'method_not_allowed', 'a known path with another method; the Allow header lists the methods'],
  ] as const) {
    registry.registerComponent('responses', name, {
      description: `HTTP ${ERROR_STATUS[code]} \`${code}\`: ${why}`,
      content: {
        'application/json': {
          schema: {
            type: 'object',
            properties: {
              error: {
                type: 'object',
                properties: { code: { type: 'string', const: code }, message: { type: 'string' } },
                required: ['code', 'message'],
              },
            },
            required: ['error'],
          },
        },
      },
    });
  }
  const ops = [...operations].sort(
    (a, b) => openApiPath(a).localeCompare(openApiPath(b)) || a.method.localeCompare(b.method),
  );
  for (const op of ops) registry.registerPath(toRouteConfig(op));
  opts.more?.(registry);
  const catalogue = Object.entries(ERROR_STATUS)
    .map(([c, s]) => {
      const endsTasks = (TASK_FAILURE_CODES as readonly string[]).includes(c) && c !== 'invalid_request';
      return `| \`${c}\` | ${endsTasks ? `${s} (chat); a failed task's error.code` : s} |`;
    })
    .join('\n');
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Kiln',
      version: opts.version ?? '1',
      description:
        'Durable gateway for AI image, chat and video generation. ' +
        'Every error body is `{"error": {"code", "message"}}`.\n\n' +
        `| Error code | HTTP status |\n|---|---|\n${catalogue}`,
    },
    ...(opts.serverUrl ? { servers: [{ url: opts.serverUrl }] } : {}),
  });
}

/** The documented answer of a content endpoint: 302 with the file's URL in Location. */
export const redirectResponse = (what: string, location: string): ResponseDoc => ({
  description: `Location: ${what}`,
  headers: { Location: { description: location, schema: { type: 'string' } } },
});

/** An OpenAPI link that hands the answer's `id` to another operation's `{id}` (poll it, cancel it, …). */
export const idLink = (operationId: string, description: string) => ({
  operationId,
  parameters: { id: '$response.body#/id' },
  description,
});

/** The `Idempotency-Key` request header of the submit operations, documented (their handlers check it). */
export const IdempotencyKeyHeader = z.object({
  'Idempotency-Key': z
    .string()
    .min(1)
    .max(255)
    .regex(/^[\x21-\x7e]+$/)
    .optional()
    .meta({
      description:
        'Makes the submit safe to retry: 1-255 visible ASCII characters (0x21-0x7E), scoped to the caller. ' +
        'The same key with the same request returns the original task (`Idempotent-Replayed: true`); with ' +
        'another request, 422 `idempotency_key_reused`. Use a fresh random key (a UUID) per logical submit.',
      example: '3f1c8a2e-7d4b-4e8a-9c1f-2b6d5e0a7c93',
    }),
});
