# syntax=docker/dockerfile:1
# Kiln API and worker image (same image, different command; see docker-compose.yml).

# Build stage: the API compiled to JavaScript, the client package and the console (TypeScript and
# Vite are dev dependencies).
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM node:20-slim
ENV NODE_ENV=production
WORKDIR /app

# Dependencies first, so this layer is cached until package*.json change. API and worker run the
# compiled output; the worker's workflow bundle is built from workflows/*.ts at its start.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund \
    && npm cache clean --force

COPY . .
COPY --from=build /app/dist ./dist
COPY --from=build /app/console/dist ./console/dist

# Blob storage shared between api and worker (a named volume in docker-compose.yml picks
# up this ownership when it is first created).
RUN mkdir -p /data/blobs && chown -R node:node /data
USER node

# MALLOC_ARENA_MAX: the worker's native core runs many threads, and glibc's default of one malloc
# arena per thread costs the worker tens of MiB of RSS (README, "Worker memory").
ENV PORT=8080 \
    BLOB_DIR=/data/blobs \
    MALLOC_ARENA_MAX=2
EXPOSE 8080

# `node` directly rather than through npm or npx: one process, so SIGTERM from `docker stop`
# reaches Kiln's graceful shutdown (and the API's supervisor forwards it to its processes).
CMD ["node", "dist/server/src/server.js"]
