// API entry: API_PROCESSES processes (default one per core) share PORT (SO_REUSEPORT); the first
// also starts and supervises the others (src/ops/api-cluster.ts). Each shuts down gracefully on
// SIGTERM/SIGINT.
import cluster from 'node:cluster';
import type { Server } from 'node:http';
import { loadConfig } from '../config/env.js';
import { ConfigError } from '../config/models.js';
import { createLogger, exitAfterLogs } from '../ops/log.js';
import { reportListening, startSiblings, type Siblings } from '../ops/api-cluster.js';
import { startIdleGc } from '../ops/idle-gc.js';
import type { ReadModelRebuild } from '../tasks/rebuild/rebuild.js';

/** Longest a stopping API waits for in-flight requests (streamed chat replies included). */
const SHUTDOWN_GRACE_MS = 30_000;

async function main() {
  const config = loadConfig();
  const log = createLogger(config.logLevel, 'kiln-api', config.ops.logFormat, config.ops.logBufferBytes);
  const shared = config.apiProcesses > 1;
  const { createApi } = await import('./runtime.js');
  const api = await createApi(config, log);
  const release = holdRebuildForDrill(api.rebuild);
  // Shared: every process binds its own socket to the port (exclusive: not the cluster's handle).
  const server: Server = api.app.listen({ port: config.port, host: config.host, reusePort: shared, exclusive: shared });
  let siblings: Siblings | undefined;
  server.on('listening', () => {
    log.info(
      { port: config.port, publicBaseUrl: config.publicBaseUrl, authMode: config.authMode },
      'kiln api listening',
    );
    reportListening();
    // The first process starts the others once it serves: a start-up failure shows here, once.
    if (shared && cluster.isPrimary)
      siblings = startSiblings(config.apiProcesses - 1, log, SHUTDOWN_GRACE_MS, () => stop('start-up failure', 1));
  });
  const idleGc = startIdleGc({ log });
  let stopping = false;
  const stop = (signal: string, code = 0) => {
    // With several processes a terminal's Ctrl-C reaches the others twice (SIGINT, then SIGTERM).
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: finishing in-flight requests');
    const othersStopped = siblings?.stop() ?? Promise.resolve();
    // Unready at once (load balancers stop sending), no new connections, in-flight requests finish
    // (their responses close keep-alive connections); then Redis and Temporal are closed.
    api.drain();
    idleGc.stop();
    release();
    server.close(
      () =>
        void Promise.all([api.close(), othersStopped]).then(() => {
          log.info('kiln api stopped');
          exitAfterLogs(log, code);
        }),
    );
    server.closeIdleConnections();
    setTimeout(() => {
      log.warn('requests still running after the shutdown grace time; exiting');
      exitAfterLogs(log, 1);
    }, SHUTDOWN_GRACE_MS).unref();
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

/**
 * Drills only (test/production/rebuild-drill.ts, which kills this process mid-rebuild): with
 * KILN_DRILL_HOLD_REBUILD_AT=N a first rebuild run waits after its Nth page, its lock renewed, until
 * the process is killed or stops; a resumed run (runs > 1) never waits. Unset: no hook. Returns
 * what ends the wait.
 */
function holdRebuildForDrill(rebuild: ReadModelRebuild): () => void {
  const at = Number(process.env.KILN_DRILL_HOLD_REBUILD_AT || 0);
  if (!(at > 0)) return () => undefined;
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  rebuild.afterStep = (p) => (p.runs === 1 && p.pages >= at ? released : undefined);
  return release;
}

main().catch((err) => {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(1);
});
