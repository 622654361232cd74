# syntax=docker/dockerfile:1
# Kiln API and worker image (same image, different command; see docker-compose.yml).

# Build stage: the API compiled to JavaScript, the client package and the console (TypeScript and
# Vite are dev dependencies).
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM node:24-slim
ENV NODE_ENV=production
WORKDIR /app

# jemalloc for the API and the worker (bin/kiln-run preloads it; README, "Memory"): glibc's malloc
# kept tens of MiB of freed buffers (images, list pages) in holes of its heap after load; jemalloc
# hands them back within seconds. Linked to one path whatever the architecture.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libjemalloc2 \
    && ln -s "$(dpkg -L libjemalloc2 | grep '/libjemalloc\.so\.2$')" /usr/local/lib/libjemalloc.so.2 \
    && rm -rf /var/lib/apt/lists/*

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

ENV PORT=8080 \
    BLOB_DIR=/data/blobs
EXPOSE 8080

# bin/kiln-run (the worker: `bin/kiln-run worker`, docker-compose.yml) sets the allocator and heap
# settings, then `exec`s node: one process, not npm or npx, so SIGTERM from `docker stop` reaches
# Kiln's graceful shutdown (and the API's first process forwards it to the others).
CMD ["sh", "bin/kiln-run", "api"]
