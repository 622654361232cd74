// A fake image host for reference-image tests: a real HTTP server on a loopback address of the
// test's choosing (127.0.0.2 stands in for a public host), counting every request it receives.
//   /ok.png              a PNG                      /img?type=T&bytes=N   N bytes served as type T
//   /chunked?bytes=N     N bytes, no content-length /redirect?to=URL      302 to URL
//   /hops?n=N            a chain of N redirects to /ok.png               /missing  404
import type { IncomingMessage, ServerResponse } from 'node:http';
import { TINY_PNG } from '../integration/providers/gemini/fake-gemini.js';
import { FakeServer } from './fake-server.js';

export class FakeImageHost extends FakeServer<string> {
  constructor() {
    super('fake image host');
  }

  override start(host = '127.0.0.2', port = 0): Promise<this> {
    return super.start(host, port);
  }

  protected handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    this.record(url.pathname + url.search);
    const bytes = Number(url.searchParams.get('bytes') ?? 0);
    switch (url.pathname) {
      case '/ok.png':
        res.writeHead(200, { 'content-type': 'image/png', 'content-length': TINY_PNG.length }).end(TINY_PNG);
        return;
      case '/img':
        res
          .writeHead(200, { 'content-type': url.searchParams.get('type') ?? 'image/png', 'content-length': bytes })
          .end(Buffer.alloc(bytes, 7));
        return;
      case '/chunked': {
        res.writeHead(200, { 'content-type': 'image/jpeg' });
        const chunk = Buffer.alloc(1024, 1);
        for (let sent = 0; sent < bytes; sent += chunk.length)
          res.write(chunk.subarray(0, Math.min(chunk.length, bytes - sent)));
        res.end();
        return;
      }
      case '/redirect':
        res.writeHead(302, { location: url.searchParams.get('to') ?? '/ok.png' }).end();
        return;
      case '/hops': {
        const n = Number(url.searchParams.get('n') ?? 0);
        res.writeHead(302, { location: n <= 1 ? '/ok.png' : `/hops?n=${n - 1}` }).end();
        return;
      }
      default:
        res.writeHead(404, { 'content-type': 'text/plain' }).end('not here');
    }
  }
}
