// Memory of a whole stack as the issue counts it: PSS (proportional set size), summed over every
// process of every role. PSS splits a shared page among the processes that map it, so two Node
// processes are not each charged the whole node binary, and the sum is what the stack costs the
// machine. Linux only (/proc/PID/smaps_rollup, kernel 4.14+).
import { readFileSync } from 'node:fs';
import { resolveRoles, type CpuRole } from './lib.js';

/** PSS of one process in MiB; 0 when it is gone (exited between listing and reading). */
export function pssMiB(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

export interface StackMemory {
  /** MiB per role, each role's processes summed. */
  roles: Record<string, number>;
  /** Processes per role, for the report (a supervisor and its children are 3). */
  counts: Record<string, number>;
  /** The sum over the roles that are not `outside`. */
  total: number;
  /** MiB of each `outside` role, when it had processes. */
  outside?: Record<string, number>;
}

/** PSS of each role (a process counts for the first role that claims it) and their sum. */
export function stackMemory(roles: Record<string, CpuRole>): StackMemory {
  const resolved = resolveRoles(roles);
  const out: StackMemory = { roles: {}, counts: {}, total: 0 };
  for (const [name, ps] of Object.entries(resolved)) {
    const mib = ps.reduce((a, p) => a + pssMiB(p.pid), 0);
    if (roles[name]!.outside) {
      if (ps.length) out.outside = { ...out.outside, [name]: mib };
      continue;
    }
    out.roles[name] = mib;
    out.counts[name] = ps.length;
    out.total += mib;
  }
  return out;
}

/**
 * PSS of a process tree, grouped by command line: each process goes to the first group whose
 * pattern matches it, or to `other`.
 */
export function treeMemory(rootPid: number, groups: [string, RegExp][]): StackMemory {
  const out: StackMemory = { roles: {}, counts: {}, total: 0 };
  for (const p of resolveRoles({ tree: { tree: [rootPid] } }).tree) {
    const name = groups.find(([, re]) => re.test(p.cmdline))?.[0] ?? 'other';
    const mib = pssMiB(p.pid);
    out.roles[name] = (out.roles[name] ?? 0) + mib;
    out.counts[name] = (out.counts[name] ?? 0) + 1;
    out.total += mib;
  }
  return out;
}

export const memoryText = (m: StackMemory): string =>
  `**${m.total.toFixed(0)} MiB** (` +
  Object.entries(m.roles)
    .map(([k, v]) => `${k} ${v.toFixed(0)}${m.counts[k] > 1 ? ` in ${m.counts[k]}` : ''}`)
    .join(', ') +
  ')' +
  (m.outside
    ? `; outside it: ${Object.entries(m.outside)
        .map(([k, v]) => `${k} ${v.toFixed(0)}`)
        .join(', ')}`
    : '');

/**
 * Samples the stack every `everyMs` and keeps the reading with the highest total: the peak a
 * machine must have room for. Sampling costs ~1 ms of CPU per process per reading.
 */
export function peakSampler(roles: Record<string, CpuRole>, everyMs = 500) {
  let peak: StackMemory = { roles: {}, counts: {}, total: 0 };
  const take = () => {
    const m = stackMemory(roles);
    if (m.total > peak.total) peak = m;
  };
  const timer = setInterval(take, everyMs);
  take();
  return {
    stop(): StackMemory {
      clearInterval(timer);
      take();
      return peak;
    },
  };
}
