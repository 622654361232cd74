// Routes that belong to no task kind: liveness, the model catalogue and the generated files.
import { z } from 'zod';
import type { Model } from '../config/models.js';
import { KilnError } from '../shared/errors.js';
import { EXT_BY_TYPE, type FsBlobStore } from '../blobs/local.js';
import { modelList, ModelList } from '../infra/models.js';
import { allowedModels } from '../keys/allowed.js';
import { route, type RouteDef } from '../http/route-table.js';

export interface CommonRouteDeps {
  models: Model[];
  blobs: FsBlobStore;
}

export function commonRoutes({ models, blobs }: CommonRouteDeps): RouteDef[] {
  return [
    route({
      method: 'get',
      route: '/healthz',
      operationId: 'healthz',
      tags: ['operations'],
      auth: false,
      summary: 'Liveness: the process is up',
      responses: { 200: { description: 'Alive', schema: z.object({ status: z.literal('ok') }) } },
      handler: (ctx) => {
        ctx.body = { status: 'ok' };
      },
    }),

    route({
      method: 'get',
      route: '/v1/models',
      operationId: 'listModels',
      tags: ['models'],
      summary: 'Configured models and their kinds',
      description: 'In keys mode, a key restricted to some models sees only those.',
      responses: { 200: { description: 'Models', schema: ModelList } },
      handler: (ctx, { caller }) => {
        ctx.body = modelList(allowedModels(caller, models));
      },
    }),

    route({
      method: 'get',
      route: '/v1/files/:name',
      operationId: 'getFile',
      tags: ['files'],
      auth: false,
      summary: 'A generated file (unguessable name, immutable)',
      request: { params: z.object({ name: z.string() }) },
      responses: {
        200: {
          description: 'The file',
          contentType: [...Object.keys(EXT_BY_TYPE), 'application/octet-stream'],
          schema: z.string().meta({ format: 'binary' }),
        },
      },
      errors: ['not_found'],
      handler: async (ctx, { params }) => {
        const file = await blobs.open(params.name);
        if (!file) throw new KilnError('not_found', 'No such file.');
        ctx.type = file.type;
        ctx.length = file.size;
        // Names are random and content never changes under a name.
        ctx.set('Cache-Control', 'public, max-age=31536000, immutable');
        ctx.body = file.stream;
      },
    }),
  ];
}
