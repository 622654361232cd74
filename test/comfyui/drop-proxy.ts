// A proxy in front of a real ComfyUI for the lookup drills: it passes every request on, and for
// POST /prompt it can lose the answer after ComfyUI has received the prompt and answered
// (`drop`), or keep the answers owed until the test lets them go (`hold`). It records each
// POST /prompt's prompt_id and ComfyUI's status, so a test counts what Kiln sent.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProxiedPrompt {
  promptId: string;
  /** ComfyUI's answer status; 0 when it could not be reached. */
  status: number;
}

export class DropProxy {
  readonly prompts: ProxiedPrompt[] = [];
  /** Every request, as `METHOD path`. */
  readonly seen: string[] = [];
  mode: 'pass' | 'drop' | 'hold' = 'pass';
  /** Answers owed while `hold`: each closes its client's connection unanswered when let go. */
  private held: ServerResponse[] = [];
  private server: Server | null = null;
  baseUrl = '';

  constructor(private readonly target: string) {}

  async start(): Promise<this> {
    const s = createServer((req, res) => void this.handle(req, res));
    s.keepAliveTimeout = 1000;
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    this.server = s;
    this.baseUrl = `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    this.dropHeld();
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }

  /** How many held answers are owed. */
  get holding(): number {
    return this.held.length;
  }

  /** Closes every held client connection without an answer (the answers are lost). */
  dropHeld(): void {
    for (const res of this.held.splice(0)) res.socket?.destroy();
  }

  /** How many POST /prompt carried each prompt id. */
  sentPerPrompt(): Map<string, number> {
    const m = new Map<string, number>();
    for (const p of this.prompts) m.set(p.promptId, (m.get(p.promptId) ?? 0) + 1);
    return m;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const path = req.url ?? '/';
    this.seen.push(`${req.method} ${path}`);
    const isPrompt = req.method === 'POST' && path === '/prompt';
    const mode = this.mode;
    let answer: Response;
    try {
      answer = await fetch(`${this.target}${path}`, {
        method: req.method ?? 'GET',
        headers: {
          ...(req.headers['content-type'] ? { 'content-type': String(req.headers['content-type']) } : {}),
        },
        ...(body.length ? { body: new Uint8Array(body) } : {}),
      });
    } catch {
      if (isPrompt) this.prompts.push({ promptId: promptIdOf(body), status: 0 });
      // ComfyUI is down: the client sees its connection fail, as it would without the proxy.
      return void res.socket?.destroy();
    }
    const bytes = Buffer.from(await answer.arrayBuffer());
    if (isPrompt) {
      this.prompts.push({ promptId: promptIdOf(body), status: answer.status });
      // ComfyUI received the prompt and answered; the client never gets the answer.
      if (mode === 'drop') return void res.socket?.destroy();
      if (mode === 'hold') return void this.held.push(res);
    }
    res.writeHead(answer.status, {
      'content-type': answer.headers.get('content-type') ?? 'application/octet-stream',
      'content-length': bytes.length,
    });
    res.end(bytes);
  }
}

function promptIdOf(body: Buffer): string {
  try {
    return String((JSON.parse(body.toString('utf8')) as { prompt_id?: unknown }).prompt_id);
  } catch {
    return '';
  }
}
