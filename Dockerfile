# flowhint: one image for the webhook and the agent (`flowhint webhook`, `flowhint agent`).
# Multi-stage: the TypeScript is bundled into plain, minified JavaScript in a build stage
# (build/app.ts, esbuild: build/bundle.ts says why and what it saves), so the image runs
# JavaScript with its dependencies inside and carries no node_modules: Node's type stripping
# would cost the webhook about 17 MiB of RSS, per-file modules the agent about 9 more (see
# README, Benchmarks). The runtime is Node 24 slim with the host tools the agent drives (nft,
# ip, conntrack, sysctl). Runs as non-root by default (the webhook); the agent DaemonSet adds
# NET_ADMIN and hostNetwork in its Pod spec.
#
# BASE_IMAGE is Debian bookworm slim with Node 24 at /usr/local/bin (node, npm). Users build
# with the default; CI, which cannot pull from a registry, passes a local equivalent built by
# `npm run image` (.ci/image/build.sh). Nothing else differs between the two.
ARG BASE_IMAGE=node:24-bookworm-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY api ./api
COPY webhook ./webhook
COPY agent ./agent
COPY certs/generate.ts certs/cli.ts ./certs/
COPY lib ./lib
COPY bin ./bin
COPY build/bundle.ts build/app.ts ./build/
# `npm run build`'s image part, without npm: with --ignore-scripts the `node` devDependency
# has no binary, and npm would put its .bin/node first on PATH.
RUN node build/app.ts

FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends nftables conntrack iproute2 procps \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# The bundle needs no node_modules; package.json says its .js files are ES modules.
COPY package.json ./
COPY --from=build /app/dist/app ./dist
COPY manifests/examples ./manifests/examples
# `flowhint` on PATH, so `kubectl exec POD -- flowhint status` works as the docs say.
RUN chmod 0755 /app/dist/bin/flowhint.js && ln -s /app/dist/bin/flowhint.js /usr/local/bin/flowhint
ENV NODE_ENV=production NODE_COMPILE_CACHE=/tmp/node-compile-cache
USER 65532:65532
ENTRYPOINT ["node", "/app/dist/bin/flowhint.js"]
CMD ["--help"]
