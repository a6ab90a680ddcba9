#!/usr/bin/env bash
# Run the imagecheck image on this machine without Docker or a container runtime, the way a
# runtime would: the image's root filesystem (from buildah) mounted READ-ONLY, /proc and a
# minimal /dev, the host's /etc/hosts and /etc/resolv.conf, in private mount and PID
# namespaces (the entrypoint is PID 1) on the host network; then the image's entrypoint with
# its environment and working directory, as its user, with no capabilities and
# no_new_privs. Needs root (mount, chroot) and python3 on the host.
#
#   scripts/image-run.sh [-v HOST_PATH:PATH[:ro]]... [-e NAME=VALUE]... [--] [ARG...]
#
# ARGs follow the entrypoint, as in `docker run IMAGE ARG...`. Exits with its exit code.
# IMAGECHECK_IMAGE names the image (default localhost/imagecheck:dev).
set -euo pipefail

IMAGE="${IMAGECHECK_IMAGE:-localhost/imagecheck:dev}"
export STORAGE_DRIVER="${STORAGE_DRIVER:-vfs}"

volumes=()
extra_env=()
while [ $# -gt 0 ]; do
  case "$1" in
    -v) volumes+=("$2"); shift 2 ;;
    -e) extra_env+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done

config() { buildah inspect --type image --format "$1" "$IMAGE"; }
user=$(config '{{.OCIv1.Config.User}}')
workdir=$(config '{{.OCIv1.Config.WorkingDir}}')
mapfile -t entrypoint < <(config '{{range .OCIv1.Config.Entrypoint}}{{println .}}{{end}}' | sed '/^$/d')
mapfile -t image_env < <(config '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' | sed '/^$/d')
if [ $# -eq 0 ]; then  # no ARG: the image's CMD, as a runtime does
  mapfile -t cmd < <(config '{{range .OCIv1.Config.Cmd}}{{println .}}{{end}}' | sed '/^$/d')
  set -- "${cmd[@]}"
fi
if ! [[ "$user" =~ ^[0-9]+:[0-9]+$ ]]; then
  echo "image-run: the image's user must be numeric UID:GID, not '$user'" >&2
  exit 2
fi

ctr=$(buildah from --pull=never --quiet "$IMAGE")
trap 'buildah rm "$ctr" >/dev/null' EXIT
mnt=$(buildah mount "$ctr")

# Mount points go into the container's own writable layer (thrown away on exit), as a
# runtime's init layer does; the image is not changed.
mkdir -p "$mnt/proc" "$mnt/dev" "$mnt/etc"
touch "$mnt/etc/hosts" "$mnt/etc/resolv.conf"
for volume in "${volumes[@]}"; do
  IFS=: read -r src dst _ <<<"$volume"
  if [ -d "$src" ]; then mkdir -p "$mnt$dst"; else mkdir -p "$(dirname "$mnt$dst")" && touch "$mnt$dst"; fi
done

# Runs inside the new namespaces; the arrays above are passed in with declare -p.
# shellcheck disable=SC2317  # called through declare -f in the unshare below
inner() {
  local root
  root=$(mktemp -d)
  bind_ro() { mount --bind "$1" "$2" && mount -o remount,bind,ro "$2"; }
  bind_ro "$mnt" "$root"
  mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
  mount -t tmpfs -o nosuid,noexec,mode=755,size=64k tmpfs "$root/dev"
  for dev in null zero random urandom; do
    touch "$root/dev/$dev"
    mount --bind "/dev/$dev" "$root/dev/$dev"
  done
  bind_ro /etc/hosts "$root/etc/hosts"
  bind_ro /etc/resolv.conf "$root/etc/resolv.conf"
  local volume src dst mode
  for volume in "${volumes[@]}"; do
    IFS=: read -r src dst mode <<<"$volume"
    if [ "$mode" = ro ]; then bind_ro "$src" "$root$dst"; else mount --bind "$src" "$root$dst"; fi
  done
  # chroot, cd to the working directory, drop to the image's user (which clears every
  # capability), then exec the entrypoint with exactly the image's environment plus -e.
  exec setpriv --no-new-privs python3 -c '
import os, sys
root, workdir, user, n_env = sys.argv[1:5]
env = dict(e.split("=", 1) for e in sys.argv[5:5 + int(n_env)])
argv = sys.argv[5 + int(n_env):]
uid, gid = (int(x) for x in user.split(":"))
os.chroot(root)
os.chdir(workdir or "/")
os.setgroups([])
os.setgid(gid)
os.setuid(uid)
os.execve(argv[0], argv, env)
' "$root" "$workdir" "$user" "$((${#image_env[@]} + ${#extra_env[@]}))" \
    "${image_env[@]}" "${extra_env[@]}" "${entrypoint[@]}" "$@"
}

status=0
unshare --mount --pid --fork --propagation private \
  bash -c "$(declare -p mnt workdir user image_env extra_env entrypoint volumes); $(declare -f inner); inner \"\$@\"" \
  image-run "$@" || status=$?
exit "$status"
