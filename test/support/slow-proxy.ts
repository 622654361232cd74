// A TCP proxy that holds every chunk for `delayMs` in both directions: a slow link to a real
// server (Redis here), so a test can show that an ordering does not rest on loopback being fast.
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

export interface SlowProxy {
  port: number;
  close(): Promise<void>;
}

export async function slowProxy(target: { host: string; port: number }, delayMs: number): Promise<SlowProxy> {
  const sockets = new Set<Socket>();
  const relay = (from: Socket, to: Socket) => {
    from.on('data', (chunk) => setTimeout(() => to.writable && to.write(chunk), delayMs));
    from.on('close', () => setTimeout(() => to.destroy(), delayMs));
    from.on('error', () => undefined);
  };
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    relay(client, upstream);
    relay(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
