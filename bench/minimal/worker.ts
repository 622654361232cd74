// The bench's baseline worker, its own process: minimalBaselineWorkflow on MINIMAL_QUEUE and its
// one activity on MINIMAL_QUEUE.act, as Kiln runs its workflow and its model's activity queue;
// minimalLocalWorkflow runs the same activity locally, in the workflow's worker.
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';

export const minimalActivities = {
  async noop(): Promise<string> {
    return 'done';
  },
};

const queue = process.env.MINIMAL_QUEUE ?? 'bench-minimal';
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./workflow.ts', import.meta.url)),
    logger: { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error: console.error },
  });
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
  const workers = await Promise.all([
    Worker.create({ connection, taskQueue: queue, workflowBundle, activities: minimalActivities }),
    Worker.create({ connection, taskQueue: `${queue}.act`, activities: minimalActivities }),
  ]);
  process.stdout.write('minimal-ready\n');
  process.once('SIGTERM', () => workers.forEach((w) => w.shutdown()));
  await Promise.all(workers.map((w) => w.run()));
  await connection.close();
}
