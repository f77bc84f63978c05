#!/usr/bin/env bash
# `npm run image`: build the real Dockerfile without a daemon or a registry, as root.
#
# 1. A base image equivalent to node:24-bookworm-slim: Debian bookworm (debootstrap minbase,
#    slimmed as Debian's -slim images are: no docs, man pages or locales), with Node 24 and npm
#    at /usr/local as the official image lays them out. Node is the project's own `node`
#    devDependency binary; npm is the npm registry's tarball. The root file system is cached
#    under .cache/image/ and the image is rebuilt only when its inputs change.
# 2. `buildah bud --isolation chroot` of ./Dockerfile with BASE_IMAGE set to that base.
#
# Needs buildah and debootstrap (Debian packages; installed here if missing, with apt).
# Prints the image name on its last line. IMAGE overrides the tag (default localhost/flowhint:dev).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
cache=$root/.cache/image
image=${IMAGE:-localhost/flowhint:dev}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
log() { echo "image: $*" >&2; }

[ "$(id -u)" = 0 ] || { echo "image: FH_IMAGE_NOT_ROOT: building needs root (buildah, debootstrap); run as root" >&2; exit 1; }
need=()
command -v buildah >/dev/null || need+=(buildah)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]} (apt)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2; }
fi

node_bin=$root/node_modules/node/bin/node
[ -x "$node_bin" ] || { echo "image: FH_IMAGE_NO_NODE: $node_bin is missing; run npm ci first" >&2; exit 1; }
node_version=$("$node_bin" --version)
npm_version=${NPM_VERSION:-$(npm --version)}
mkdir -p "$cache"

# 1a. The Debian root file system, once.
rootfs=$cache/rootfs-bookworm
if [ ! -f "$rootfs/.complete" ]; then
  log "debootstrap bookworm (minbase) into .cache/image (a few minutes, once)"
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap.log" >&2; echo "image: FH_IMAGE_DEBOOTSTRAP: debootstrap failed; see .cache/image/debootstrap.log" >&2; exit 1; }
  # As Debian's -slim images: no documentation, man pages or locales, now or when apt installs more.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
CFG
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda,locale}/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log
  printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
    "$mirror" "$mirror" >"$rootfs/etc/apt/sources.list"
  touch "$rootfs/.complete"
fi

# 1b. npm's tarball, once per version.
npm_tgz=$cache/npm-$npm_version.tgz
if [ ! -f "$npm_tgz" ]; then
  log "fetching npm $npm_version from the npm registry"
  (cd "$cache" && npm pack --silent "npm@$npm_version" >/dev/null)
fi

# 1c. The base image, rebuilt only when its inputs change (a label records them).
inputs="bookworm-minbase-slim node=$node_version npm=$npm_version script=$(sha256sum "$0" | cut -c1-12)"
base=localhost/flowhint-base:bookworm-node24
have=$(buildah inspect --type image --format '{{index .ImageAnnotations "dev.flowhint.base-inputs"}}' "$base" 2>/dev/null || true)
if [ "$have" != "$inputs" ]; then
  log "base image $base ($inputs)"
  ctr=$(buildah from scratch)
  trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
  mnt=$(buildah mount "$ctr")
  cp -a "$rootfs"/. "$mnt"/
  rm -f "$mnt/.complete"
  install -m 0755 "$node_bin" "$mnt/usr/local/bin/node"
  mkdir -p "$mnt/usr/local/lib/node_modules/npm"
  tar -xzf "$npm_tgz" -C "$mnt/usr/local/lib/node_modules/npm" --strip-components=1
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$mnt/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$mnt/usr/local/bin/npx"
  # apt as in Debian's official images (debuerreotype): no package caches or .debs left
  # behind by an install, no translations.
  cat >"$mnt/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
  echo 'Acquire::Languages "none";' >"$mnt/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$mnt/etc/apt/apt.conf.d/docker-autoremove-suggests"
  rm -f "$mnt"/var/cache/apt/*.bin
  buildah umount "$ctr" >/dev/null
  buildah config --env NODE_VERSION="${node_version#v}" --cmd node \
    --annotation "dev.flowhint.base-inputs=$inputs" "$ctr"
  buildah commit --quiet --rm "$ctr" "$base" >/dev/null
  trap - EXIT
fi

# 2. The Dockerfile, as users build it, on that base. Machines whose HTTPS goes through an
#    intercepting proxy trust its CA in the host's bundle: npm inside the build gets that
#    bundle through a bind mount and a global npmrc that exist only while RUN steps run, so
#    the image carries neither.
mounts=()
host_ca=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
if [ -f "$host_ca" ]; then
  printf 'cafile=/usr/local/etc/build-host-ca.crt\n' >"$cache/npmrc"
  mounts=(--volume "$host_ca:/usr/local/etc/build-host-ca.crt:ro" --volume "$cache/npmrc:/usr/local/etc/npmrc:ro")
fi
log "buildah bud --isolation chroot -t $image"
buildah bud --isolation chroot --layers "${mounts[@]}" --build-arg "BASE_IMAGE=$base" -t "$image" -f Dockerfile . >&2
echo "$image"
