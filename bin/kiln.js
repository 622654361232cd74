#!/usr/bin/env node
// `kiln` CLI: the project runs TypeScript through tsx, so this shim registers tsx's loader and
// hands over to src/cli/main.ts.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
