#!/usr/bin/env bash
# Build the imagecheck image for linux/amd64 and linux/arm64 as one OCI image index, in an OCI
# image layout directory, without Docker and without an emulated build (issue #16):
#
#   1. scripts/image-build.sh builds the amd64 image (buildah, as for the single-arch image);
#   2. docker/arm64root.py assembles the arm64 root from the amd64 one: Debian's arm64 .debs
#      and aarch64 wheels for the machine code, everything else as it is; then smoke-tests it
#      under qemu-aarch64-static (no binfmt);
#   3. docker/ocilayout.py writes both roots as one-layer images (tar+gzip) and their index.
#
#   scripts/image-build-multiarch.sh    writes build/multiarch/{layout,rootfs-arm64,sizes.json}
#   scripts/image-build-multiarch.sh --webhook   the webhook image: build/multiarch-webhook
#   scripts/image-build-multiarch.sh --cluster   the cluster image: build/multiarch-cluster
#
# Push the layout with any OCI tool, e.g. skopeo copy --all oci:build/multiarch/layout:dev \
# docker://REGISTRY/imagecheck:TAG (tests/image/test_multiarch.py pushes it over the HTTP API).
#
# Environment:
#   IMAGECHECK_MULTIARCH_OUT  output directory (default build/multiarch[-EXTRAS]; replaced)
#   IMAGECHECK_IMAGE          the amd64 image scripts/image-build.sh builds (its default)
#   IMAGECHECK_EXTRAS         as scripts/image-build.sh (--webhook, --cluster set it)
#   IMAGECHECK_BUILD_BASE     as scripts/image-build.sh; made again (once) when a package
#                             version it holds is gone from the mirror
#   PIP_INDEX_URL, PIP_CA_BUNDLE, DEBIAN mirror: as scripts/image-build.sh (the arm64 .debs
#   come from this machine's apt sources)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'image-build-multiarch: %s\n' "$*" >&2; }

EXTRAS="${IMAGECHECK_EXTRAS:-}"
case "${1:-}" in
  -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  --webhook) EXTRAS=webhook ;;
  --cluster) EXTRAS=cluster ;;
  "") ;;
  *) log "unknown argument $1 (try --help)"; exit 2 ;;
esac
export IMAGECHECK_EXTRAS="$EXTRAS"  # image-build.sh builds and names the amd64 image by it
SUFFIX="${EXTRAS:+-${EXTRAS//,/-}}"
OUT="${IMAGECHECK_MULTIARCH_OUT:-build/multiarch$SUFFIX}"
IMAGE="${IMAGECHECK_IMAGE:-localhost/imagecheck$SUFFIX:dev}"
BASE="${IMAGECHECK_BUILD_BASE:-localhost/imagecheck-build-base:bookworm}"  # image-build.sh's
TAG=dev
ctr="" amd64=""  # build_roots sets them; the EXIT trap removes the container
export STORAGE_DRIVER="${STORAGE_DRIVER:-vfs}"
export BUILDAH_ISOLATION="${BUILDAH_ISOLATION:-chroot}"

# qemu-user-static runs the arm64 smoke test, binutils-aarch64-linux-gnu strips the aarch64
# extension modules, python3-venv gives pip its own environment for the aarch64 downloads.
install_tools() {
  local need=()
  command -v qemu-aarch64-static >/dev/null 2>&1 || need+=(qemu-user-static)
  command -v aarch64-linux-gnu-strip >/dev/null 2>&1 || need+=(binutils-aarch64-linux-gnu)
  python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
  command -v dpkg-deb >/dev/null 2>&1 || need+=(dpkg)
  [ ${#need[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${need[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${need[@]}" >/dev/null
}

# The amd64 image, mounted in $ctr at $amd64, and the arm64 root beside it. arm64root.py exits 3
# when a package version the amd64 root holds is gone from the mirror (Debian keeps only the
# newest of each suite): the build base is older than the mirror, so it is made again, once.
build_roots() {
  local attempt rc
  for attempt in 1 2; do
    IMAGECHECK_IMAGE="$IMAGE" scripts/image-build.sh
    rm -rf "$OUT" "$work/debs" "$work/apt" "$work/debroot" "$work/wheels"
    mkdir -p "$OUT"
    ctr=$(buildah from --pull=never --quiet "$IMAGE")
    amd64=$(buildah mount "$ctr")
    rc=0
    python3 docker/arm64root.py --from-root "$amd64" --out "$OUT/rootfs-arm64" --src . \
      --work "$work" --extras "$EXTRAS" \
      --pip "$work/venv/bin/python -m pip --disable-pip-version-check" || rc=$?
    [ "$rc" -eq 0 ] && return 0
    if [ "$rc" -ne 3 ] || [ "$attempt" -eq 2 ]; then
      exit "$rc"
    fi
    log "the build base $BASE is older than the mirror: making it again"
    buildah rm "$ctr" >/dev/null
    buildah rmi "$BASE" >/dev/null
  done
}

main() {
  local started work ca
  started=$(date +%s)
  install_tools
  work=$(mktemp -d)
  # shellcheck disable=SC2064  # expand $work now; $ctr when the trap runs
  trap "[ -n \"\$ctr\" ] && buildah rm \"\$ctr\" >/dev/null 2>&1; rm -rf '$work'" EXIT
  ca="${PIP_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
  [ -s "$ca" ] && export PIP_CERT="$ca"
  python3 -m venv "$work/venv"
  build_roots
  buildah inspect --type image "$IMAGE" |
    python3 -c 'import json, sys; json.dump(json.load(sys.stdin)["OCIv1"], sys.stdout)' \
      >"$work/config.json"
  python3 docker/ocilayout.py --config "$work/config.json" --out "$OUT/layout" --tag "$TAG" \
    "linux/amd64=$amd64" "linux/arm64=$OUT/rootfs-arm64" >"$OUT/sizes.json"
  log "wrote $OUT/layout (tag $TAG) in $(($(date +%s) - started)) s"
  python3 -c 'import json, sys
for platform, size in json.load(open(sys.argv[1])).items():
    raw, gz = size["uncompressed"] / 1e6, size["compressed"] / 1e6
    print(f"{platform}: {raw:.1f} MB uncompressed, {gz:.1f} MB compressed")' "$OUT/sizes.json"
}

main "$@"
