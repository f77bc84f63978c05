# flowhint: one image for the webhook and the agent (`flowhint webhook`, `flowhint agent`).
# Multi-stage: dependencies are installed in a build stage; the runtime is Node 24 slim with
# the host tools the agent drives (nft, ip, conntrack, sysctl). Runs as non-root by default
# (the webhook); the agent DaemonSet adds NET_ADMIN and hostNetwork in its Pod spec.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:24-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends nftables conntrack iproute2 procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY api ./api
COPY webhook ./webhook
COPY agent ./agent
COPY certs/generate.ts certs/cli.ts ./certs/
COPY lib ./lib
COPY bin ./bin
COPY manifests/examples ./manifests/examples
ENV NODE_ENV=production NODE_COMPILE_CACHE=/tmp/node-compile-cache
USER 65532:65532
ENTRYPOINT ["node", "/app/bin/flowhint.ts"]
CMD ["--help"]
