import { defineConfig } from 'vitest/config';

// Three tiers (`npm run test:unit`, `npm run test:integration`, `npm run test:production`; `npm test` runs all):
//   unit         test/unit/**: no Redis, no Temporal dev server. Workflows run on Temporal's
//                time-skipping test server (.tools/bin/temporal-test-server, from the bootstrap),
//                the rest on in-memory fakes. Files run in parallel.
//   integration  test/integration/**: one real redis-server and Temporal dev server for the run.
//   production   test/production/**: failure drills on the production-shaped stack (`npm run test:production`).
// Outside `npm test`:
//   comfyui      test/comfyui/**: a real ComfyUI from COMFYUI_DIR (`npm run test:comfyui`; skips without it).
export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          testTimeout: 20_000,
          // Starting the time-skipping server and bundling the workflows.
          hookTimeout: 60_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          // Integration files share one Temporal dev server and one redis-server on a 2-core machine:
          // run files one after another so timings stay honest.
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          // test/production/**: Kiln's own processes (2 API, 2 workers) on the production-shaped stack
          // of scripts/production/ (PostgreSQL, Temporal server, Redis Cluster, moto S3), started once.
          name: 'production',
          include: ['test/production/**/*.test.ts'],
          globalSetup: ['test/production/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 240_000,
          hookTimeout: 300_000,
        },
      },
      {
        extends: true,
        test: {
          // A real ComfyUI (scripts/comfyui/start.ts) on the CPU; installed by scripts/comfyui/install.sh.
          name: 'comfyui',
          include: ['test/comfyui/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 120_000,
          // A cold start (first import of torch from disk) took 85 s on 2 busy cores.
          hookTimeout: 360_000,
        },
      },
    ],
  },
});
