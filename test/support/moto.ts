// moto in server mode (installed by scripts/bootstrap.sh): a real S3-compatible server on a free
// local port, for tests of the S3 blob store.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

export const MOTO =
  process.env.MOTO_SERVER_BIN ?? fileURLToPath(new URL('../../.tools/bin/moto_server', import.meta.url));

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

export async function startMoto(): Promise<{ endpoint: string; stop: () => void }> {
  if (!existsSync(MOTO))
    throw new Error(`moto_server not found at ${MOTO}: run scripts/bootstrap.sh (or set MOTO_SERVER_BIN)`);
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  const moto = spawn(MOTO, ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${endpoint}/moto-api/`)).ok) break;
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline || moto.exitCode !== null) {
      moto.kill();
      throw new Error('moto_server did not start');
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { endpoint, stop: () => moto.kill() };
}
