# syntax=docker/dockerfile:1
# Kiln API and worker image (same image, different command; see docker-compose.yml).
FROM node:20-slim

ENV NODE_ENV=production
WORKDIR /app

# Dependencies first, so this layer is cached until package*.json change.
# Runtime needs only production dependencies (tsx runs the TypeScript sources directly).
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund \
    && npm cache clean --force

COPY . .

# Blob storage shared between api and worker (a named volume in docker-compose.yml picks
# up this ownership when it is first created).
RUN mkdir -p /data/blobs && chown -R node:node /data
USER node

ENV PORT=8080 \
    BLOB_DIR=/data/blobs
EXPOSE 8080

# `node --import tsx` rather than `npx tsx`: one process, so SIGTERM from `docker stop`
# reaches Kiln's graceful shutdown directly instead of going through npx and the tsx CLI.
CMD ["node", "--import", "tsx", "src/server.ts"]
