// /admin/v1/keys: operators issue, list, change and revoke API keys (AUTH_MODE=keys), behind the
// operator token like the other admin calls (src/api/admin-routes.ts). In passthrough mode the
// routes are there (and documented) but answer not_found saying keys mode is off.
import type { RouterContext } from '@koa/router';
import { z } from 'zod';
import { BODY_ERRORS, jsonBody } from '../http/body.js';
import { adminRoute } from '../http/operator-token.js';
import { parseInput, type RouteDef } from '../http/route-table.js';
import { KilnError } from '../shared/errors.js';
import { wholeNumber } from '../tasks/routes.js';
import { KeyLimitsPatch, LimitsSchema } from '../usage/openapi.js';
import { OWNER_NAME } from '../infra/callers.js';
import { keyView, LIMITS, nowSeconds, type KeyView } from './record.js';
import type { KeyStore } from './store.js';

export interface KeyAdminDeps {
  /** Set only with AUTH_MODE=keys. */
  keys?: KeyStore;
  models: readonly { id: string }[];
  operatorToken?: string;
}

const Owner = z
  .string()
  .regex(OWNER_NAME, `must be 1-${LIMITS.ownerChars} characters: letters, digits, ".", "_" or "-"`)
  .meta({ description: 'Who the key is for: its tasks are scoped to this owner, shared by its other keys.' });
const Label = z
  .string()
  .min(1, 'must not be empty (null clears it)')
  .max(LIMITS.labelChars, `must be at most ${LIMITS.labelChars} characters`)
  .regex(/^\P{Cc}*$/u, 'must not contain control characters')
  .nullable()
  .meta({ description: `A note for operators, 1-${LIMITS.labelChars} characters.` });
const ExpiresAt = z
  .number()
  .int('must be a whole number of epoch seconds')
  .max(LIMITS.latestExpiry, 'must be before the year 10000')
  .refine((s) => s > nowSeconds(), 'must be in the future (epoch seconds)')
  .nullable()
  .meta({ description: 'Epoch seconds, in the future, when the key stops working; null: never.' });
const Models = z
  .array(z.string().min(1).max(LIMITS.modelIdChars))
  .min(1, 'must name at least one model (null allows every model)')
  .max(LIMITS.models, `must name at most ${LIMITS.models} models`)
  .refine((m) => new Set(m).size === m.length, 'must not name a model twice')
  .nullable()
  .meta({
    description:
      `The only model ids (GET /v1/models) the key may use, 1-${LIMITS.models}; null: every model. ` +
      'Any other answers 403 `model_not_allowed`.',
  });

const Limits = KeyLimitsPatch.optional();

const CreateRequest = z
  .object({
    owner: Owner,
    label: Label.optional(),
    expires_at: ExpiresAt.optional(),
    models: Models.optional(),
    limits: Limits,
  })
  .strict()
  .meta({ id: 'ApiKeyCreateRequest' });
const UpdateRequest = z
  .object({ label: Label.optional(), expires_at: ExpiresAt.optional(), models: Models.optional(), limits: Limits })
  .strict()
  .meta({
    id: 'ApiKeyUpdateRequest',
    description: "Only the fields sent change; null clears one. `limits` is merged into the key's limits.",
  });

const epoch = (description: string) => z.number().int().nullable().meta({ description });
const ApiKey = z
  .object({
    id: z.string().meta({ description: 'The key id (`key_…`): how the admin calls name it. Not the key.' }),
    object: z.literal('api_key'),
    owner: z.string(),
    label: z.string().nullable(),
    hint: z.string().meta({ description: 'The first characters of the key, to recognise it.' }),
    created_at: z.number().int(),
    last_used_at: epoch('Last request with the key (updated at most about once a minute); null: never used.'),
    expires_at: epoch('When the key stops working; null: never.'),
    revoked_at: epoch('When it was revoked; null: not revoked. A revoked key is refused within a second.'),
    models: z.array(z.string()).nullable().meta({ description: 'The models it may use; null: every model.' }),
    limits: LimitsSchema.meta({
      description:
        "The key's own limits, counted over this key alone, null where it has none; its owner's limits " +
        '(GET /admin/v1/owners/{owner}/limits) apply as well.',
    }),
  })
  .meta({ id: 'ApiKey' });
const CreatedApiKey = ApiKey.extend({
  key: z.string().meta({ description: 'The key itself: shown in this answer only, stored only as a hash.' }),
}).meta({ id: 'CreatedApiKey' });
const ApiKeyList = z
  .object({
    object: z.literal('list'),
    data: z.array(ApiKey),
    has_more: z.boolean().meta({ description: 'More keys follow: ask again with `after` = the last id.' }),
  })
  .meta({ id: 'ApiKeyList' });

const ListQuery = z.object({
  owner: Owner.optional().meta({ description: "Only this owner's keys." }),
  limit: wholeNumber(1, LIMITS.listPage).default(20).meta({ description: 'Keys per page' }),
  after: z.string().max(100).optional().meta({ description: 'Cursor: the last id of the previous page' }),
});
const KeyId = z.object({ id: z.string().max(100).meta({ description: 'The key id (`key_…`)' }) });

function found<T>(v: T | null, id: string): T {
  if (v === null) throw new KilnError('not_found', `No API key with id "${id}".`);
  return v;
}

export function keyAdminRoutes({ keys, models, operatorToken }: KeyAdminDeps): RouteDef[] {
  const known = new Set(models.map((m) => m.id));
  /** The store, in keys mode (the caller is the operator already: nothing about input rules before that). */
  const keyStore = (): KeyStore => {
    if (!keys)
      throw new KilnError(
        'not_found',
        'API keys are managed only in keys mode: this Kiln runs AUTH_MODE=passthrough (set AUTH_MODE=keys).',
      );
    return keys;
  };
  const readBody = async <T>(ctx: RouterContext, schema: z.ZodType<T>): Promise<T> => {
    await jsonBody()(ctx, async () => undefined);
    const body = parseInput(schema, ctx.request.body, 'body') as T & { models?: string[] | null };
    const missing = body.models?.findIndex((m) => !known.has(m)) ?? -1;
    if (missing >= 0)
      throw new KilnError(
        'invalid_request',
        `body.models[${missing}]: model "${body.models![missing]}" does not exist; GET /v1/models lists the models.`,
      );
    return body;
  };
  /** Answers the key the path names as `act` leaves it (read, changed or revoked); not_found when there is none. */
  const answerKey = async (ctx: RouterContext, act: (store: KeyStore, id: string) => Promise<KeyView | null>) => {
    const store = keyStore();
    const { id } = parseInput(KeyId, ctx.params, 'params');
    ctx.body = found(await act(store, id), id);
  };
  const one = { 200: { description: 'The key (never the key itself)', schema: ApiKey } };

  return [
    adminRoute(operatorToken, {
      method: 'post',
      route: '/admin/v1/keys',
      operationId: 'createApiKey',
      summary: 'Issue an API key (keys mode)',
      description:
        'Answers the key itself once; Kiln keeps only its SHA-256. See docs/keys.md. ' +
        'not_found: the operator token is unset, or AUTH_MODE is not keys.',
      request: { body: CreateRequest, checkedByHandler: ['body'] },
      responses: { 201: { description: 'The new key, with the key itself', schema: CreatedApiKey } },
      errors: ['invalid_request', ...BODY_ERRORS, 'not_found'],
      handler: async (ctx) => {
        const store = keyStore();
        const { owner, ...rest } = await readBody(ctx, CreateRequest);
        const { key, record } = await store.create(owner, rest);
        const { id, object, ...view } = keyView(record, null);
        ctx.status = 201;
        ctx.body = { id, object, key, ...view };
      },
    }),
    adminRoute(operatorToken, {
      method: 'get',
      route: '/admin/v1/keys',
      operationId: 'listApiKeys',
      summary: 'API keys, oldest first (revoked and expired ones included)',
      request: { query: ListQuery, checkedByHandler: ['query'] },
      responses: { 200: { description: 'A page of keys', schema: ApiKeyList } },
      errors: ['invalid_request', 'not_found'],
      handler: async (ctx) => {
        const store = keyStore();
        const q = parseInput(ListQuery, ctx.query, 'query');
        const page = await store.list(q);
        if (!page) throw new KilnError('invalid_request', `query.after: no API key with id "${q.after}".`);
        ctx.body = { object: 'list', ...page };
      },
    }),
    adminRoute(operatorToken, {
      method: 'get',
      route: '/admin/v1/keys/:id',
      operationId: 'getApiKey',
      summary: 'One API key',
      request: { params: KeyId, checkedByHandler: ['params'] },
      responses: one,
      errors: ['invalid_request', 'not_found'],
      handler: (ctx) => answerKey(ctx, (store, id) => store.get(id)),
    }),
    adminRoute(operatorToken, {
      method: 'patch',
      route: '/admin/v1/keys/:id',
      operationId: 'updateApiKey',
      summary: "Change a key's label, expiry, allowed models or limits",
      description: 'Every API process applies the change within a second.',
      request: { params: KeyId, body: UpdateRequest, checkedByHandler: ['params', 'body'] },
      responses: one,
      errors: ['invalid_request', ...BODY_ERRORS, 'not_found'],
      handler: (ctx) => answerKey(ctx, async (store, id) => store.update(id, await readBody(ctx, UpdateRequest))),
    }),
    adminRoute(operatorToken, {
      method: 'post',
      route: '/admin/v1/keys/:id/revoke',
      operationId: 'revokeApiKey',
      summary: 'Revoke a key (idempotent)',
      description:
        'Every API process refuses the key within a second (401 `invalid_api_key`). Revoking a revoked key ' +
        'changes nothing and answers it as it is.',
      request: { params: KeyId, checkedByHandler: ['params'] },
      responses: one,
      errors: ['invalid_request', 'not_found'],
      handler: (ctx) => answerKey(ctx, (store, id) => store.revoke(id)),
    }),
  ];
}
