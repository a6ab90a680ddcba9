#!/usr/bin/env bash
# Build the imagecheck container image from docker/Dockerfile on a machine without Docker:
# buildah (vfs storage, chroot isolation) on a local Debian 12 base made by debootstrap, so
# nothing is pulled from a container registry. See docker/README.md.
#
#   scripts/image-build.sh            build (or rebuild) localhost/imagecheck:dev, print its size
#   scripts/image-build.sh --webhook  the webhook image (`serve` too: the webhook extra),
#                                     localhost/imagecheck-webhook:dev
#   scripts/image-build.sh --cluster  the cluster image (`reap` and `audit` too: the cluster
#                                     extra), localhost/imagecheck-cluster:dev
#
# Idempotent: buildah and debootstrap are installed only when missing, the base image is made
# only when it is not in buildah's storage, and buildah's layer cache skips the dependency
# install while pyproject.toml and docker/constraints.txt are unchanged.
#
# Environment:
#   IMAGECHECK_IMAGE       image to build            (default localhost/imagecheck:dev; with
#                                                     extras localhost/imagecheck-EXTRAS:dev,
#                                                     commas as dashes)
#   IMAGECHECK_EXTRAS      optional extras to install, comma-separated (the EXTRAS build arg;
#                          default none; --webhook sets webhook, --cluster cluster)
#   IMAGECHECK_BUILD_BASE  local build-stage base    (default localhost/imagecheck-build-base:bookworm)
#   DEBIAN_MIRROR          mirror for debootstrap    (default: this machine's apt sources, else
#                                                     http://deb.debian.org/debian)
#   PIP_CA_BUNDLE          CA bundle pip trusts in the build, for TLS-intercepting proxies
#                          (default: this machine's /etc/ssl/certs/ca-certificates.crt); it is
#                          mounted as a build secret, never stored in a layer
#   PIP_INDEX_URL          package index for the build (default https://pypi.org/simple)
set -euo pipefail
cd "$(dirname "$0")/.."

EXTRAS="${IMAGECHECK_EXTRAS:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --webhook) EXTRAS=webhook; shift ;;
    --cluster) EXTRAS=cluster; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) printf 'image-build: unknown argument %s (try --help)\n' "$1" >&2; exit 2 ;;
  esac
done
# One image per extra, named after it: imagecheck-webhook, imagecheck-cluster.
IMAGE="${IMAGECHECK_IMAGE:-localhost/imagecheck${EXTRAS:+-${EXTRAS//,/-}}:dev}"
BASE="${IMAGECHECK_BUILD_BASE:-localhost/imagecheck-build-base:bookworm}"
SUITE=bookworm
export STORAGE_DRIVER="${STORAGE_DRIVER:-vfs}"
export BUILDAH_ISOLATION="${BUILDAH_ISOLATION:-chroot}"

log() { printf 'image-build: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else
    log "needs root for: $*"
    return 1
  fi
}

install_tools() {
  local need=()
  command -v buildah >/dev/null 2>&1 || need+=(buildah)
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  [ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
  [ ${#need[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${need[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
}

# The first enabled Debian mirror for $SUITE in this machine's apt sources (deb822 .sources
# files, then one-line sources.list), else the public default.
debian_mirror() {
  local uri=""
  if [ -n "${DEBIAN_MIRROR:-}" ]; then
    echo "$DEBIAN_MIRROR"
    return
  fi
  shopt -s nullglob
  local sources=(/etc/apt/sources.list.d/*.sources) lists=(/etc/apt/sources.list /etc/apt/sources.list.d/*.list)
  shopt -u nullglob
  if [ ${#sources[@]} -gt 0 ]; then
    uri=$(awk -v suite="$SUITE" 'BEGIN { RS = ""; FS = "\n" }
      {
        uris = ""; ok_suite = 0; ok_type = 0; enabled = 1
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { split(substr($i, 6), u, " "); uris = u[1] }
          if ($i ~ /^Suites:/ && (" " substr($i, 8) " ") ~ (" " suite " ")) ok_suite = 1
          if ($i ~ /^Types:/ && $i ~ /[[:space:]]deb([[:space:]]|$)/) ok_type = 1
          if ($i ~ /^Enabled:[[:space:]]*no/) enabled = 0
        }
        if (uris != "" && ok_suite && ok_type && enabled) { print uris; exit }
      }' "${sources[@]}" 2>/dev/null || true)
  fi
  if [ -z "$uri" ] && [ ${#lists[@]} -gt 0 ]; then
    uri=$(awk -v suite="$SUITE" '$1 == "deb" {
        i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit }
      }' "${lists[@]}" 2>/dev/null || true)
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

# buildah unpacks each layer after making / private (containers/storage's chrootarchive), which
# fails with "remount /, flags: 0x44000: invalid argument" when / is not a mount point: in a
# plain `chroot DIR`, never on a machine or in a container. Say so, and how to fix it.
check_root_mount() {
  awk '$5 == "/" { found = 1 } END { exit !found }' /proc/self/mountinfo 2>/dev/null && return
  log "/ is not a mount point here (a plain chroot?): buildah cannot unpack image layers;"
  log "bind-mount the chroot's directory onto itself before entering it (mount --bind DIR DIR)"
  return 1
}

image_exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# A Debian $SUITE root filesystem with python3 (3.11), venv and CA certificates, imported as
# a local image: the build stage's base here, where nothing can be pulled.
make_base() {
  if image_exists "$BASE"; then
    log "base $BASE exists (remove it with: buildah rmi $BASE)"
    return
  fi
  local mirror work ctr mnt
  mirror=$(debian_mirror)
  work=$(mktemp -d)
  # shellcheck disable=SC2064  # expand now: $work is local
  trap "rm -rf '$work'" RETURN
  log "debootstrap $SUITE from $mirror"
  as_root debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,binutils \
    "$SUITE" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -20 "$work/debootstrap.log" >&2
    return 1
  }
  as_root rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* \
    "$work"/rootfs/usr/share/doc "$work"/rootfs/usr/share/man "$work"/rootfs/usr/share/locale
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$work/rootfs/." "$mnt/"
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /bin/bash --label "org.opencontainers.image.description=debootstrap $SUITE minbase" "$ctr"
  buildah commit --rm --quiet "$ctr" "$BASE" >/dev/null
  log "made base $BASE"
}

build_image() {
  local ca="${PIP_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}" args=()
  [ -s "$ca" ] && args+=(--secret "id=pip-ca,src=$ca")
  [ -n "${PIP_INDEX_URL:-}" ] && args+=(--build-arg "PIP_INDEX_URL=$PIP_INDEX_URL")
  [ -n "$EXTRAS" ] && args+=(--build-arg "EXTRAS=$EXTRAS")
  log "building $IMAGE${EXTRAS:+ (extras: $EXTRAS)} (buildah, $STORAGE_DRIVER, $BUILDAH_ISOLATION)"
  buildah build --layers --pull=never \
    --build-arg "BUILD_IMAGE=$BASE" \
    --ignorefile docker/Dockerfile.dockerignore \
    "${args[@]}" \
    -f docker/Dockerfile -t "$IMAGE" .
}

# Uncompressed size in bytes: the sum of the image's layers as uncompressed tar files (what
# `docker images` calls the size), from a copy pushed to a local directory.
image_size() {
  local dir
  dir=$(mktemp -d)
  # shellcheck disable=SC2064  # expand now: $dir is local
  trap "rm -rf '$dir'" RETURN
  buildah push --quiet --disable-compression "$IMAGE" "dir:$dir" >/dev/null
  python3 -c 'import json, sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))' \
    <"$dir/manifest.json"
}

main() {
  local started size
  started=$(date +%s)
  check_root_mount
  install_tools
  make_base
  build_image
  size=$(image_size)
  log "built $IMAGE in $(($(date +%s) - started)) s"
  printf '%s uncompressed size: %s bytes (%s MB)\n' "$IMAGE" "$size" \
    "$(awk -v b="$size" 'BEGIN { printf "%.1f", b / 1e6 }')"
}

main "$@"
