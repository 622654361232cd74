// docker-compose.yml, checked without a Docker engine: services, images, ports, start order,
// health checks, and that every setting the API and workers get is one Kiln's configuration knows.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../../scripts/services.js';
import { dynamicConfigYaml, PRODUCTION_DYNAMIC_CONFIG } from '../../../scripts/production/temporal-server.js';
import { EnvSchema } from '../../../src/config/env.js';
import { SEARCH_ATTRIBUTES } from '../../../src/shared/task.js';

const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true });
const services = compose.services as Record<string, any>;
const dependsOn = (s: string): Record<string, { condition: string }> => services[s].depends_on ?? {};
/** Compose `${VAR:-default}` / `${VAR:?message}`: the value docker would use with an empty .env. */
const resolved = (v: unknown) =>
  String(v).replace(/\$\{[A-Z0-9_]+(?::?[-?])?([^}]*)\}/g, (_m, d: string) =>
    d.startsWith('set ') ? 'x'.repeat(64) : d,
  );

describe('docker-compose.yml', () => {
  it('has every part of a production deployment', () => {
    expect(Object.keys(services).sort()).toEqual(
      [
        'api',
        'minio',
        'minio-setup',
        'postgresql',
        'redis',
        'temporal',
        'temporal-schema',
        'temporal-setup',
        'temporal-ui',
        'worker',
      ].sort(),
    );
    expect(services.temporal.image).toMatch(/^temporalio\/server:/);
    // Not the deprecated auto-setup image anywhere.
    expect(JSON.stringify(services)).not.toContain('auto-setup');
    expect(services['temporal-schema'].image).toMatch(/^temporalio\/admin-tools:/);
    expect(services['temporal-schema'].command.join('\n')).toMatch(/temporal-sql-tool --plugin postgres12/);
    expect(services['temporal-schema'].command.join('\n')).toMatch(/update-schema/);
    expect(services.temporal.environment.DB).toBe('postgres12');
    expect(services.postgresql.image).toMatch(/^postgres:/);
    expect(services.minio.image).toMatch(/^minio\/minio:/);
    expect(services['temporal-ui'].image).toMatch(/^temporalio\/ui:/);
    expect(services.worker.deploy.replicas).toMatch(/KILN_WORKERS/);
  });

  // The production-shaped server of Kiln's drills and bench:production is what measures these.
  it('runs Temporal with the production-shaped server’s dynamic config', () => {
    const path = services.temporal.environment.DYNAMIC_CONFIG_FILE_PATH as string;
    expect(path.startsWith('/etc/temporal/')).toBe(true);
    expect(services.temporal.volumes).toContain(`./deploy/temporal-dynamicconfig.yaml:${path}:ro`);
    const mounted = parse(readFileSync(join(ROOT, 'deploy/temporal-dynamicconfig.yaml'), 'utf8'));
    expect(mounted).toEqual(parse(dynamicConfigYaml(PRODUCTION_DYNAMIC_CONFIG)));
    expect(mounted['history.hostLevelCacheMaxSize']).toEqual([{ value: 4096 }]);
  });

  it('registers Kiln’s search attributes before the API and workers start', () => {
    const setup = services['temporal-setup'].command.join('\n');
    for (const name of Object.values(SEARCH_ATTRIBUTES)) expect(setup).toContain(name);
    expect(setup).toContain('--type Keyword');
    for (const s of ['api', 'worker']) {
      expect(dependsOn(s)['temporal-setup'].condition).toBe('service_completed_successfully');
      expect(dependsOn(s)['minio-setup'].condition).toBe('service_completed_successfully');
      expect(dependsOn(s).redis.condition).toBe('service_healthy');
    }
    expect(dependsOn('temporal')['temporal-schema'].condition).toBe('service_completed_successfully');
    expect(dependsOn('temporal-schema').postgresql.condition).toBe('service_healthy');
    expect(dependsOn('temporal-setup').temporal.condition).toBe('service_healthy');
  });

  it('depends only on services that exist, waiting on health only where a health check exists', () => {
    for (const [name, svc] of Object.entries(services)) {
      for (const [dep, { condition }] of Object.entries<any>(svc.depends_on ?? {})) {
        expect(services[dep], `${name} -> ${dep}`).toBeDefined();
        if (condition === 'service_healthy') expect(services[dep].healthcheck, `${dep} health check`).toBeDefined();
        if (condition === 'service_completed_successfully')
          expect(services[dep].restart, `${dep} is one-shot`).toBe('no');
      }
    }
    for (const s of ['redis', 'postgresql', 'temporal', 'minio', 'temporal-ui', 'api', 'worker'])
      expect(services[s].healthcheck, s).toBeDefined();
  });

  it('publishes only the API, the Web UI (on localhost) and the file store', () => {
    const published = Object.fromEntries(
      Object.entries(services)
        .filter(([, s]) => s.ports)
        .map(([n, s]) => [n, s.ports.map(resolved)]),
    );
    expect(published).toEqual({ api: ['8787:8080'], 'temporal-ui': ['127.0.0.1:8080:8080'], minio: ['9000:9000'] });
    expect(services.api.environment.PORT).toBe(8080);
    expect(services.api.healthcheck.test.join(' ')).toContain('127.0.0.1:8080/healthz');
    expect(services.worker.environment.WORKER_METRICS_ADDRESS).toBe('0.0.0.0:9464');
    expect(services.worker.healthcheck.test.join(' ')).toContain('127.0.0.1:9464/metrics');
  });

  it('gives the API and workers only settings the configuration schema knows, and valid ones', () => {
    const known = new Set(Object.keys(EnvSchema.shape));
    for (const s of ['api', 'worker']) {
      const env = services[s].environment as Record<string, unknown>;
      const unknown = Object.keys(env).filter((k) => !known.has(k));
      expect(unknown, `${s}: settings src/config/env.ts does not read`).toEqual([]);
      const values = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, resolved(v)]));
      const parsed = EnvSchema.safeParse(values);
      expect(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`), s).toEqual([]);
      expect(values.BLOB_STORE).toBe('s3');
      expect(values.REDIS_URL).toBe('redis://redis:6379');
      expect(values.TEMPORAL_ADDRESS).toBe('temporal:7233');
    }
    // Required secrets fail loudly when missing rather than defaulting.
    expect(services.api.environment.KILN_SECRET).toMatch(/^\$\{KILN_SECRET:\?/);
    // The production-shaped stack's settings (scripts/production/, test/production/): Redis Cluster
    // seeds and API processes are optional, empty meaning unset; Temporal's history shards are set.
    for (const s of ['api', 'worker'])
      expect(services[s].environment.REDIS_CLUSTER_NODES).toBe('${REDIS_CLUSTER_NODES:-}');
    expect(services.api.environment.API_PROCESSES).toBe('${API_PROCESSES:-}');
    expect(resolved(services.temporal.environment.NUM_HISTORY_SHARDS)).toBe('4');
  });
});
