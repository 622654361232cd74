// Our own PostgreSQL 15 cluster for Temporal's persistence: initdb once into `dir/data`, then the
// postgres binary itself as the child (not pg_ctl), so a drill can kill -9 the real postmaster.
// Debian's managed cluster (pg_ctlcluster, port 5432) is never touched.
import { chownSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PG_BIN, Proc, run, runAsIfRoot, waitUntil, type RunAs } from './proc.js';

export interface Postgres {
  host: string;
  port: number;
  /** Unix socket directory (the data directory, mode 0700: only its owner and root connect). */
  socketDir: string;
  proc: Proc;
  /** Runs SQL as the superuser over the socket; returns psql's unaligned, tuples-only output. */
  sql(database: string, statement: string): Promise<string>;
  start(): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<void>;
  kill(): Promise<void>;
}

export async function startPostgres(opts: {
  dir: string;
  port: number;
  user: string;
  password: string;
}): Promise<Postgres> {
  const dataDir = join(opts.dir, 'data');
  const runAs = await runAsIfRoot('postgres');
  mkdirSync(opts.dir, { recursive: true });
  if (!existsSync(join(dataDir, 'PG_VERSION'))) await initdb(dataDir, runAs);

  const proc = new Proc(
    'postgres',
    join(PG_BIN, 'postgres'),
    [
      '-D',
      dataDir,
      '-p',
      String(opts.port),
      '-k',
      dataDir,
      '-c',
      'listen_addresses=127.0.0.1',
      // Temporal's default store holds up to maxConns per service (4 services in one process) plus visibility.
      '-c',
      'max_connections=300',
    ],
    join(opts.dir, 'postgres.log'),
    {
      runAs,
      // SIGINT is PostgreSQL's "fast" shutdown; SIGTERM ("smart") would wait for Temporal to disconnect.
      stopSignal: 'SIGINT',
      graceMs: 30_000,
    },
  );

  const sql = (database: string, statement: string) =>
    run(
      join(PG_BIN, 'psql'),
      [
        '-h',
        dataDir,
        '-p',
        String(opts.port),
        '-U',
        'postgres',
        '-d',
        database,
        '-v',
        'ON_ERROR_STOP=1',
        '-XAtq',
        '-c',
        statement,
      ],
      { env: { PGCONNECT_TIMEOUT: '3' } },
    );

  const start = async () => {
    proc.start();
    // After a kill -9 the postmaster first replays its WAL (crash recovery); that is part of start-up.
    await waitUntil('postgres', async () => (await sql('postgres', 'select 1')).trim() === '1', {
      proc,
      timeoutMs: 60_000,
    });
  };
  await start();

  // Temporal's login: password authentication over TCP, as a real deployment would connect.
  // CREATEDB lets temporal-sql-tool create-database its two databases.
  const role = opts.user.replace(/"/g, '""');
  const pw = opts.password.replace(/'/g, "''");
  const name = opts.user.replace(/'/g, "''");
  await sql(
    'postgres',
    `DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${name}')
    THEN CREATE ROLE "${role}" LOGIN CREATEDB PASSWORD '${pw}';
    ELSE ALTER ROLE "${role}" LOGIN CREATEDB PASSWORD '${pw}'; END IF; END $$`,
  );

  return {
    host: '127.0.0.1',
    port: opts.port,
    socketDir: dataDir,
    proc,
    sql,
    start,
    stop: (signal) => proc.stop(signal),
    kill: async () => {
      // The backends outlive the postmaster for a moment (they exit on noticing its death); a new
      // postmaster refuses to start while they still hold the shared memory, so wait them out.
      const pid = proc.pid();
      const children = pid
        ? (await run('ps', ['-o', 'pid=', '--ppid', String(pid)]).catch(() => ''))
            .split('\n')
            .map(Number)
            .filter(Boolean)
        : [];
      await proc.kill();
      await waitUntil('postgres backends exit', async () => children.every(gone), {
        timeoutMs: 30_000,
        intervalMs: 50,
      });
    },
  };
}

/** True once `pid` has exited (a zombie, state Z in /proc/pid/stat, has exited too). */
function gone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /s, '')
      .startsWith('Z');
  } catch {
    return true;
  }
}

async function initdb(dataDir: string, runAs: RunAs | undefined): Promise<void> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  if (runAs) {
    chownSync(dataDir, runAs.uid, runAs.gid);
    // The postgres user must be able to reach the directory through every parent.
    await run('test', ['-w', dataDir], { runAs }).catch(() => {
      throw new Error(
        `the 'postgres' user cannot write ${dataDir} (a parent ` +
          `directory is not searchable by it); choose another --dir`,
      );
    });
  }
  // Local (socket) connections are trusted: the socket lives in the 0700 data directory.
  // TCP connections need a SCRAM password, as in production.
  await run(
    join(PG_BIN, 'initdb'),
    ['-D', dataDir, '-U', 'postgres', '-E', 'UTF8', '--no-locale', '--auth-local=trust', '--auth-host=scram-sha-256'],
    { runAs, cwd: '/' },
  );
}
