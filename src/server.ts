// API process: listens on PORT and shuts down gracefully on SIGTERM/SIGINT.
import type { Server } from 'node:http';
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './log.js';
import { createApi } from './runtime.js';

async function main() {
  const config = loadConfig();
  const log = createLogger(config.logLevel, 'kiln-api');
  const api = await createApi(config, log);
  const server: Server = api.app.listen(config.port, config.host);
  server.on('listening', () => log.info({ port: config.port, publicBaseUrl: config.publicBaseUrl, authMode: config.authMode }, 'kiln api listening'));
  const stop = (signal: string) => {
    log.info({ signal }, 'shutting down: finishing in-flight requests');
    server.close(() => void api.close().then(() => process.exit(0)));
    server.closeIdleConnections();
    setTimeout(() => process.exit(1), 10_000).unref();
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(1);
});
