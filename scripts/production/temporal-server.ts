// The real Temporal server (not the CLI's dev server) on PostgreSQL: schema set up with
// temporal-sql-tool from the same version, frontend/history/matching/worker in one process,
// namespace and Kiln's search attributes registered through the API.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time.js';
import proto from '@temporalio/proto';
import { stringify } from 'yaml';
import { SEARCH_ATTRIBUTES } from '../../src/shared/task.js';
import type { Postgres } from './postgres.js';
import { freeLowPort, freePorts, Proc, run, TEMPORAL_CACHE_DIR, tool, waitUntil } from './proc.js';
import { LEAN_HISTORY_CONFIG } from '../services.js';

/**
 * The dynamic config of a production Temporal server for Kiln: this stack's server and
 * docker-compose's (deploy/temporal-dynamicconfig.yaml, checked against this by a unit test).
 */
export const PRODUCTION_DYNAMIC_CONFIG: Record<string, unknown> = {
  'limit.maxIDLength': 255,
  // The history cache keeps 128,000 workflows' state for an hour by default: a host's memory
  // then grows with every finished task. A gateway's workflows are short (docs/operating.md).
  'history.hostLevelCacheMaxSize': 4096,
  // One cluster: no cross-cluster cache, history task schedulers sized for one host's pool.
  ...LEAN_HISTORY_CONFIG,
};

/** A dynamic-config file: every key with one unconstrained value. */
export function dynamicConfigYaml(values: Record<string, unknown>): string {
  return (
    '# Temporal dynamic config (polled every 10s). Keys: ' +
    'https://github.com/temporalio/temporal/blob/main/common/dynamicconfig/constants.go\n' +
    stringify(Object.fromEntries(Object.entries(values).map(([k, value]) => [k, [{ value }]])))
  );
}

export interface TemporalServer {
  /** host:port of the frontend gRPC service (TEMPORAL_ADDRESS). */
  address: string;
  namespace: string;
  httpUrl: string;
  metricsUrl: string;
  proc: Proc;
  start(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  kill(): Promise<void>;
}

export interface TemporalOptions {
  dir: string;
  pg: Postgres;
  dbUser: string;
  dbPassword: string;
  namespace?: string;
  /** Fixed once the databases exist: Temporal refuses to start with a different count. */
  numHistoryShards?: number;
  retentionDays?: number;
  logLevel?: string;
}

const binDir = join(TEMPORAL_CACHE_DIR, 'bin');
const schemaDir = process.env.TEMPORAL_SCHEMA_DIR ?? join(TEMPORAL_CACHE_DIR, 'schema', 'postgresql', 'v12');

/** create-database / setup-schema / update-schema for both stores; safe to run on every start. */
export async function setupSchemas(pg: Postgres, user: string, password: string): Promise<void> {
  const sqlTool = tool('temporal-sql-tool', 'TEMPORAL_SQL_TOOL_BIN', binDir);
  const env = { SQL_PASSWORD: password }; // not a flag: flags show in ps
  for (const [db, versioned] of [
    ['temporal', 'temporal'],
    ['temporal_visibility', 'visibility'],
  ] as const) {
    const base = [
      '--plugin',
      'postgres12',
      '--endpoint',
      pg.host,
      '--port',
      String(pg.port),
      '--user',
      user,
      '--database',
      db,
    ];
    const exists = (await pg.sql('postgres', `SELECT 1 FROM pg_database WHERE datname = '${db}'`)).trim() === '1';
    if (!exists) await run(sqlTool, [...base, 'create-database'], { env });
    const versionTable = (await pg.sql(db, `SELECT to_regclass('public.schema_version') IS NOT NULL`)).trim() === 't';
    if (!versionTable) await run(sqlTool, [...base, 'setup-schema', '--version', '0.0'], { env });
    // Applies only the versions above the recorded one, so an up-to-date database is a no-op.
    await run(sqlTool, [...base, 'update-schema', '--schema-dir', join(schemaDir, versioned, 'versioned')], { env });
  }
}

export async function startTemporalServer(opts: TemporalOptions): Promise<TemporalServer> {
  const namespace = opts.namespace ?? 'default';
  const configDir = join(opts.dir, 'config');
  mkdirSync(configDir, { recursive: true });
  await setupSchemas(opts.pg, opts.dbUser, opts.dbPassword);

  // Ports are chosen afresh for each startTemporalServer (and kept by its restarts): a single
  // cluster finds its services through membership rows that it rewrites at start-up, and the
  // rpcAddress kept in cluster metadata only matters between clusters.
  const [frontend, frontendHttp, history, matching, worker, metrics] = await freePorts(6);
  const taken = new Set<number>();
  const [frontendMember, historyMember, matchingMember, workerMember] = [
    await freeLowPort(taken),
    await freeLowPort(taken),
    await freeLowPort(taken),
    await freeLowPort(taken),
  ];
  const address = `127.0.0.1:${frontend}`;
  const store = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${opts.pg.host}:${opts.pg.port}`,
      connectProtocol: 'tcp',
      user: opts.dbUser,
      password: opts.dbPassword,
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const rpc = (grpcPort: number, membershipPort: number, extra: object = {}) => ({
    rpc: { grpcPort, membershipPort, bindOnIP: '127.0.0.1', ...extra },
  });
  const disabled = { state: 'disabled' };
  // Adapted from the module's config/development-postgres12.yaml: loopback only, our ports,
  // archival off, quieter logs, pprof off.
  const config = {
    log: { stdout: true, level: opts.logLevel ?? 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: opts.numHistoryShards ?? 4,
      datastores: {
        'postgres-default': store('temporal', 20),
        'postgres-visibility': store('temporal_visibility', 10),
      },
    },
    global: {
      membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' },
      pprof: { port: 0 },
      metrics: { prometheus: { framework: 'tally', timerType: 'histogram', listenAddress: `127.0.0.1:${metrics}` } },
    },
    services: {
      frontend: rpc(frontend, frontendMember, { httpPort: frontendHttp }),
      history: rpc(history, historyMember),
      matching: rpc(matching, matchingMember),
      worker: rpc(worker, workerMember),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: address,
          httpAddress: `127.0.0.1:${frontendHttp}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    archival: { history: disabled, visibility: disabled },
    namespaceDefaults: { archival: { history: disabled, visibility: disabled } },
    dynamicConfigClient: { filepath: join(configDir, 'dynamicconfig.yaml'), pollInterval: '10s' },
  };
  writeFileSync(
    join(configDir, 'production.yaml'),
    `# Written by scripts/production/temporal-server.ts on each start; edits are overwritten.\n${stringify(config)}`,
  );
  const dynamicConfig = join(configDir, 'dynamicconfig.yaml');
  // Kept across runs so a drill can edit it live (the server polls it every 10 s).
  if (!existsSync(dynamicConfig)) writeFileSync(dynamicConfig, dynamicConfigYaml(PRODUCTION_DYNAMIC_CONFIG));

  const proc = new Proc(
    'temporal-server',
    tool('temporal-server', 'TEMPORAL_SERVER_BIN', binDir),
    ['--root', opts.dir, '--config', 'config', '--env', 'production', '--allow-no-auth', 'start'],
    join(opts.dir, 'temporal-server.log'),
    { graceMs: 30_000 },
  );

  const withConnection = async <T>(fn: (c: Connection) => Promise<T>): Promise<T> => {
    const c = await Connection.connect({ address, connectTimeout: 2000 });
    try {
      return await fn(c);
    } finally {
      await c.close();
    }
  };

  const start = async () => {
    proc.start();
    // The frontend answers before history has acquired its shards; a visibility query and a
    // describe of the namespace need the whole server, so only then is it ready.
    await waitUntil(
      'temporal-server',
      () =>
        withConnection(async (c) => {
          await c.workflowService.getSystemInfo({});
          await registerNamespace(c, namespace, opts.retentionDays ?? 3);
          await c.workflowService.listWorkflowExecutions({ namespace, pageSize: 1 });
          return true;
        }),
      { proc, timeoutMs: 120_000, intervalMs: 500 },
    );
  };
  await start();
  await withConnection((c) => registerSearchAttributes(c, namespace));

  return {
    address,
    namespace,
    httpUrl: `http://127.0.0.1:${frontendHttp}`,
    metricsUrl: `http://127.0.0.1:${metrics}/metrics`,
    proc,
    start,
    stop: (signal) => proc.stop(signal),
    kill: () => proc.kill(),
  };
}

const ALREADY_EXISTS = 6; // gRPC status code

async function registerNamespace(c: Connection, namespace: string, retentionDays: number): Promise<void> {
  try {
    await c.workflowService.registerNamespace({
      namespace,
      workflowExecutionRetentionPeriod: msToTs(`${retentionDays} days`),
    });
  } catch (err) {
    if ((err as { code?: number }).code !== ALREADY_EXISTS) throw err;
  }
  await c.workflowService.describeNamespace({ namespace });
}

/** Kiln's Keyword search attributes; waits until the namespace lists them, as services.ts does for the dev server. */
async function registerSearchAttributes(c: Connection, namespace: string): Promise<void> {
  const wanted = Object.values(SEARCH_ATTRIBUTES);
  const listed = async () => (await c.operatorService.listSearchAttributes({ namespace })).customAttributes ?? {};
  const present = await listed();
  const missing = wanted.filter((n) => !(n in present));
  if (missing.length) {
    const KEYWORD = proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
    await c.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map((n) => [n, KEYWORD])),
    });
  }
  await waitUntil(
    'search attributes',
    async () => {
      const l = await listed();
      return wanted.every((n) => n in l);
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  // The frontend validates a workflow's search attributes against its namespace cache, which
  // refreshes a few seconds after the mapping is stored: a visibility query naming all of them goes
  // through the same mapping, so once it is accepted a start with them is accepted too.
  const query = wanted.map((n) => `${n} = ''`).join(' AND ');
  await waitUntil(
    'search attributes in the frontend',
    async () => {
      await c.workflowService.countWorkflowExecutions({ namespace, query });
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
}
