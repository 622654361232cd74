// A Kiln worker in its own process, so a test can SIGKILL it mid-task.
// Configuration comes from the environment, like src/worker/main.ts; the bundle from KILN_WORKFLOW_BUNDLE.
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/env.js';
import { startWorkers } from '../../src/worker/start.js';

Runtime.install({ logger: new DefaultLogger('WARN') });
const config = loadConfig();
const workers = await startWorkers(config, pino({ level: 'silent' }), {
  workflowBundle: { codePath: process.env.KILN_WORKFLOW_BUNDLE! },
});
process.stdout.write('worker-ready\n');
process.once('SIGTERM', () => void workers.shutdown().then(() => process.exit(0)));
await workers.done;
