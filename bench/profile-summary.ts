// Summarises a V8 .cpuprofile: busy time per request, the top frames by self time, and self time
// grouped by area (Kiln's own code, each npm package, Node internals, GC, native).
export interface ProfileSummary {
  wallMs: number;
  busyMs: number;
  usPerRequest: number;
  top: { name: string; usPerRequest: number; share: number }[];
  areas: [string, number][];
}

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface CpuProfile {
  nodes: Node[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const IDLE = new Set(['(idle)', '(program)']);

function area(url: string, fn: string): string {
  if (fn === '(garbage collector)') return 'GC';
  if (!url) return `native ${fn || '(anonymous)'}`;
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return `npm ${nm[1]}`;
  if (url.startsWith('node:')) return 'node internals';
  const own = /\/(src|activities|workflows|bench)\/(.*)$/.exec(url);
  return own ? `kiln ${own[1]}/${own[2].split('/')[0]}` : url;
}

/** `windowMs`: only the samples of the last windowMs before the profile ended. */
export function summarise(p: CpuProfile, requests: number, windowMs = Infinity, topN = 15): ProfileSummary {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  const from = p.endTime - windowMs * 1000;
  let t = p.startTime;
  p.samples.forEach((id, i) => {
    t += p.timeDeltas[i] ?? 0;
    if (t >= from) self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
  });
  const frames = new Map<string, number>();
  const areas = new Map<string, number>();
  let busyUs = 0;
  for (const [id, us] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    if (IDLE.has(functionName)) continue;
    busyUs += us;
    const short = url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|activities|workflows)\//, '$1/');
    const name = `${functionName || '(anonymous)'} ${short ? `${short}:${lineNumber + 1}` : ''}`.trim();
    frames.set(name, (frames.get(name) ?? 0) + us);
    const a = area(url, functionName);
    areas.set(a, (areas.get(a) ?? 0) + us);
  }
  const per = (us: number) => us / Math.max(1, requests);
  return {
    wallMs: Math.min(windowMs, (p.endTime - p.startTime) / 1000),
    busyMs: busyUs / 1000,
    usPerRequest: per(busyUs),
    top: [...frames]
      .sort((a, b) => b[1] - a[1])
      .slice(0, topN)
      .map(([name, us]) => ({ name, usPerRequest: per(us), share: us / busyUs })),
    areas: [...areas]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([a, us]) => [a, per(us)]),
  };
}
