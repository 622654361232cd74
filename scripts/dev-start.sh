#!/bin/sh
# `npm run dev` after bootstrap: builds the console and the server, then runs scripts/dev.ts
# compiled, with the API and worker launched as production launches them (bin/kiln-run). Compiled,
# not under tsx: tsx's loader and the source maps it keeps cost each Node process tens of MiB, and
# the dev stack ran at ~1,140 MiB that way (issue 42). The server build is incremental: a second
# start compiles only what changed. `exec`: no shell or npm stays resident beside the stack.
set -e
cd "$(dirname "$0")/.."
npm run -s build:console
npm run -s build:server
exec node dist/server/scripts/dev.js
