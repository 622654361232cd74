// The upstreams of `npm run bench:failover` (bench/failover.ts): fake Gemini servers (real HTTP,
// test/integration/providers/gemini/fake-gemini.ts) that answer as programmed, remember what they answered each request,
// and attribute every request to the task whose marker (`bench task <tag>`) its prompt carries.
import {
  fail,
  ok,
  startFakeGemini,
  type Behaviour,
  type FakeGemini,
} from '../test/integration/providers/gemini/fake-gemini.js';

/** One fake upstream and what it answered each request (by the request's 1-based number). */
export interface Upstream {
  name: string;
  fake: FakeGemini;
  answers: Map<number, string>;
}

/** A fake that answers each request with `decide()`, noting the answer. */
async function upstream(name: string, decide: () => Behaviour): Promise<Upstream> {
  const fake = await startFakeGemini();
  const answers = new Map<number, string>();
  fake.setDefault((call) => {
    const b = decide();
    answers.set(call.n, b.kind === 'error' ? String(b.status) : b.kind);
    return b;
  });
  return { name, fake, answers };
}

export const healthy = () => upstream('healthy', () => ok(undefined, { delayMs: 50 }));
export const slow = () => upstream('slow', () => ok(undefined, { delayMs: 1500 }));

/**
 * Alternating windows of `windowMs` counted from `startedAt()` (good until it is set): a bad one
 * first, where every other request is refused with 503 UNAVAILABLE (exactly half), then a good
 * one where every request succeeds after 50 ms.
 */
export function flapping(name: string, windowMs: number, startedAt: () => number | undefined) {
  let badCalls = 0;
  return upstream(name, () => {
    const t0 = startedAt();
    const bad = t0 !== undefined && Math.floor((Date.now() - t0) / windowMs) % 2 === 0;
    if (bad && badCalls++ % 2 === 0) return fail(503, 'The model is overloaded. Please try again later.');
    return ok(undefined, { delayMs: 50 });
  });
}

/** An upstream that refuses `share` of its requests at random with 503 "overloaded", Gemini's answer when busy. */
export const overloaded = (name: string, share: number) =>
  upstream(name, () =>
    Math.random() < share
      ? fail(503, 'The model is overloaded. Please try again later.')
      : ok(undefined, { delayMs: 50 }),
  );

/** A request as one task's upstream saw it: where, when (ms after `since`) and what it was answered. */
export interface TaskRequest {
  upstream: string;
  n: number;
  atMs: number;
  answer: string;
}

const MARKER = /bench task (\w+)/;

/** Every request of every upstream by the task tag its prompt carries (`?` when it carries none). */
export function requestsByTask(upstreams: Upstream[], since: number): Map<string, TaskRequest[]> {
  const out = new Map<string, TaskRequest[]>();
  for (const u of upstreams) {
    for (const r of u.fake.requests) {
      const body = r.body as { contents?: { parts?: { text?: string }[] }[] } | null;
      const tag = MARKER.exec(body?.contents?.[0]?.parts?.[0]?.text ?? '')?.[1] ?? '?';
      const list = out.get(tag) ?? [];
      list.push({ upstream: u.name, n: r.n, atMs: r.at - since, answer: u.answers.get(r.n) ?? 'none' });
      out.set(tag, list);
    }
  }
  return out;
}

/** Requests per upstream in `reqs`. */
export function countByUpstream(reqs: readonly TaskRequest[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of reqs) m.set(r.upstream, (m.get(r.upstream) ?? 0) + 1);
  return m;
}

/** "name N (M answered 503)" for each upstream: the requests of the tasks `counted` keeps. */
export function requestSummary(
  upstreams: Upstream[],
  reqs: Map<string, TaskRequest[]>,
  counted: (tag: string) => boolean,
): string {
  const all = [...reqs].filter(([tag]) => counted(tag)).flatMap(([, r]) => r);
  return upstreams
    .map((u) => {
      const mine = all.filter((r) => r.upstream === u.name);
      const refused = mine.filter((r) => r.answer === '503').length;
      return `${u.name} ${mine.length}${refused ? ` (${refused} answered 503)` : ''}`;
    })
    .join(', ');
}
