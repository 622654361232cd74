// A Redis Cluster on loopback: N redis-server processes (default 6 = 3 primaries + 3 replicas)
// with append-only files, joined by `redis-cli --cluster create`. A node's nodes.conf records
// its cluster identity and its peers' ports, so a restart with the same ports rejoins the same
// cluster; different ports mean a new cluster (the caller then passes fresh: true).
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { binary, REDIS_SIZING_ARGS } from '../services.js';
import { Proc, run, tool, waitUntil } from './proc.js';

export interface RedisNode {
  port: number;
  address: string;
  proc: Proc;
  /** Restarts this node with its data (AOF + nodes.conf): it rejoins, as a replica if it was failed over. */
  start(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  kill(): Promise<void>;
}

export interface ClusterNodeInfo {
  id: string;
  port: number;
  role: 'master' | 'replica';
  failed: boolean;
  masterId?: string;
  slots: string[];
}

export interface RedisCluster {
  nodes: RedisNode[];
  /** "127.0.0.1:p1,127.0.0.1:p2,..." — seeds for a cluster client. */
  nodeList: string;
  /** CLUSTER NODES as seen by a live node. */
  topology(): Promise<ClusterNodeInfo[]>;
  /** Live primaries that own slots (the targets for a "kill a primary" drill). */
  masters(): Promise<RedisNode[]>;
  /** Every running node reports cluster_state:ok with all 16384 slots served. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** One command to one node (not cluster-aware: for CLUSTER INFO/NODES and drills). */
export async function nodeCommand(port: number, ...args: string[]): Promise<string> {
  const r = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 2000,
  });
  r.on('error', () => undefined); // surfaces as the command's rejection
  try {
    await r.connect();
    return String(await r.call(args[0], ...args.slice(1)));
  } finally {
    r.disconnect();
  }
}

function parseNodes(text: string): ClusterNodeInfo[] {
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, addr, flags, master, , , , , ...slots] = line.split(' ');
      const f = flags.split(',');
      return {
        id,
        port: Number(addr.split('@')[0].split(':').pop()),
        role: f.includes('master') ? 'master' : 'replica',
        failed: f.includes('fail') || f.includes('fail?') || f.includes('noaddr'),
        masterId: master === '-' ? undefined : master,
        slots,
      };
    });
}

/**
 * `busPorts[i]` is node i's cluster bus port, given explicitly (cluster-port) because the default,
 * port + 10000, overflows 65535 for ports from the kernel's ephemeral range.
 */
export async function startRedisCluster(opts: {
  dir: string;
  ports: number[];
  busPorts: number[];
  replicas?: number;
  fresh?: boolean;
}): Promise<RedisCluster> {
  const nodeDir = (port: number) => join(opts.dir, `node-${port}`);
  const rejoin = !opts.fresh && opts.ports.every((p) => existsSync(join(nodeDir(p), 'nodes.conf')));
  if (!rejoin) rmSync(opts.dir, { recursive: true, force: true });

  const nodes: RedisNode[] = opts.ports.map((port, i) => {
    mkdirSync(nodeDir(port), { recursive: true });
    const proc = new Proc(
      `redis-server:${port}`,
      binary('redis-server', 'REDIS_SERVER_BIN'),
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        nodeDir(port),
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-port',
        String(opts.busPorts[i]),
        // 5 s (not the default 15 s) until a silent primary is failed: drills see a failover quickly.
        '--cluster-node-timeout',
        '5000',
        '--appendonly',
        'yes',
        '--appendfsync',
        'everysec',
        '--save',
        '',
        // The 5 s default batches several replicas into one transfer; with one replica per primary it
        // only delays the first sync, during which a primary's loss cannot be failed over.
        '--repl-diskless-sync-delay',
        '0',
        ...REDIS_SIZING_ARGS,
      ],
      join(nodeDir(port), 'redis.log'),
    );
    const start = async () => {
      proc.start();
      await waitUntil(proc.name, async () => (await nodeCommand(port, 'PING')) === 'PONG', {
        proc,
        timeoutMs: 30_000,
        intervalMs: 100,
      });
    };
    return {
      port,
      address: `127.0.0.1:${port}`,
      proc,
      start,
      stop: (signal) => proc.stop(signal),
      kill: () => proc.kill(),
    };
  });

  const liveNode = () => {
    const n = nodes.find((x) => x.proc.running());
    if (!n) throw new Error('no redis cluster node is running');
    return n;
  };
  const topology = async () => parseNodes(await nodeCommand(liveNode().port, 'CLUSTER', 'NODES'));
  const replicas = opts.replicas ?? 1;
  const waitHealthy = (timeoutMs = 60_000) =>
    waitUntil(
      'redis cluster',
      async () => {
        const running = nodes.filter((x) => x.proc.running());
        for (const n of running) {
          const info = await nodeCommand(n.port, 'CLUSTER', 'INFO');
          if (!/cluster_state:ok/.test(info) || !/cluster_slots_ok:16384/.test(info)) return false;
        }
        // With every node up, also wait for the full shape (each primary has its replicas, no node
        // flagged failed), so a drill starts from a healed cluster, not one still re-pairing.
        if (running.length < nodes.length) return true;
        for (const n of running) {
          const t = parseNodes(await nodeCommand(n.port, 'CLUSTER', 'NODES'));
          const masters = t.filter((x) => x.role === 'master' && x.slots.length > 0);
          if (t.some((x) => x.failed) || masters.length * (replicas + 1) !== nodes.length) return false;
          if (masters.some((m) => t.filter((x) => x.masterId === m.id).length !== replicas)) return false;
          // A replica that never finished its first sync refuses to fail over ("disconnected from
          // master for longer than allowed"), so the cluster is not yet redundant.
          const repl = await nodeCommand(n.port, 'INFO', 'replication');
          if (/role:slave/.test(repl) && !/master_link_status:up/.test(repl)) return false;
        }
        return true;
      },
      { timeoutMs, intervalMs: 250 },
    );

  const start = async () => {
    await Promise.all(nodes.map((n) => n.start()));
    await waitHealthy();
  };

  await Promise.all(nodes.map((n) => n.start()));
  if (!rejoin) {
    await run(tool('redis-cli', 'REDIS_CLI_BIN'), [
      '--cluster',
      'create',
      ...nodes.map((n) => n.address),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
  }
  await waitHealthy();

  return {
    nodes,
    nodeList: nodes.map((n) => n.address).join(','),
    topology,
    waitHealthy,
    start,
    masters: async () => {
      const masterPorts = new Set(
        (await topology()).filter((t) => t.role === 'master' && !t.failed && t.slots.length > 0).map((t) => t.port),
      );
      return nodes.filter((n) => masterPorts.has(n.port));
    },
    // On SIGTERM each node fsyncs its AOF before exiting, so a stop loses nothing.
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}
