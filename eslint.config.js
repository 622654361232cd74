// Lint: TypeScript rules everywhere, no import cycles, and the determinism boundary for workflow code.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';

export default tseslint.config(
  { ignores: ['node_modules/**', '.tools/**', '.data/**', 'dist/**', 'console/dist/**', 'test-artifacts/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // The `kiln` shim is plain JavaScript run by Node.
    files: ['bin/**/*.js'],
    languageOptions: { globals: { process: 'readonly', URL: 'readonly' } },
  },
  {
    // A cycle makes module start-up order matter (a value read before its module ran): none allowed.
    // This rule skips type-only imports; `npm run lint:cycles` (dpdm) checks those too, since they
    // hide the same tangle.
    files: ['**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [createNodeResolver({ extensionAlias: { '.js': ['.ts', '.js'] } })],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/extensions': ['.ts', '.js'],
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }] },
  },
  {
    // AbortSignal.timeout's timer cannot be cleared: it outlives the call by its whole delay and
    // holds the call's async context (an activity, ~9 KiB) meanwhile. src/shared/deadline.ts says more.
    files: ['src/**/*.ts', 'activities/**/*.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'AbortSignal',
          property: 'timeout',
          message: 'Use deadline() or withDeadline() (src/shared/deadline.ts).',
        },
      ],
    },
  },
  {
    // Tests read loosely typed JSON bodies.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Workflow code is replayed deterministically in a sandbox: no I/O, no environment, no wall clock
    // from Node. It may value-import only @temporalio/workflow and pure shared modules; activities
    // are imported as types.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                'ioredis',
                'ioredis/*',
                'koa',
                'koa-*',
                '@koa/*',
                'undici',
                'node-fetch',
                'axios',
                'node:*',
                'http',
                'https',
                'net',
                'fs',
                'child_process',
                '@temporalio/client',
                '@temporalio/worker',
                '@temporalio/activity',
                'pino',
              ],
              message:
                'Workflow code must stay deterministic: no Redis, HTTP, Koa, Node built-ins or non-workflow Temporal packages.',
            },
            {
              group: [
                '../activities/*',
                '../activities/**',
                '../src/*',
                '!../src/shared',
                '!../src/shared/*',
                '!../src/upstreams',
                '!../src/upstreams/failover.js',
              ],
              allowTypeImports: true,
              message:
                'Import activities (and other runtime modules) as types only; value-import only src/shared and the failover decision.',
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        {
          name: 'process',
          message: 'process.env does not belong in workflow code; pass configuration as workflow input.',
        },
        { name: 'fetch', message: 'HTTP belongs in activities.' },
        { name: 'setInterval', message: 'Use workflow timers (sleep).' },
      ],
    },
  },
  {
    // What workflow code may value-import stays pure: no I/O and no Node built-ins.
    files: ['src/shared/**/*.ts', 'src/upstreams/failover.ts', 'src/upstreams/failures.ts'],
    // Keyed submits' ids are HMACs, made by the API only.
    ignores: ['src/shared/idempotency.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['ioredis', 'koa', '@koa/*', 'node:*', 'fs', 'http', 'https', 'net', '@temporalio/*', 'pino'],
              allowTypeImports: true,
              message: 'Modules that workflow code value-imports must stay pure (no I/O, no Node built-ins).',
            },
          ],
        },
      ],
    },
  },
);
