"""Run an image under containerd + runc the way the kubelet starts ``examples/job.yaml``'s
initContainer: read-only root, ``runAsUser``/``runAsGroup`` 65532, every capability dropped,
``no_new_privs``, the runtime's default seccomp profile, a memory limit (cgroup), the
termination-log file and a kubelet-style secret volume mounted, the image's entrypoint with the
pod's ``args`` and ``env``; the host's network (the tests' registries are on loopback).

``ctr run`` 1.6 has flags for some of that and not for the rest (the user, dropping *every*
capability, arguments after the entrypoint), and with ``--config`` it takes a whole OCI
runtime spec but no image. So each run is:

1. ``ctr images mount --rw [--platform]``: containerd unpacks the image for the platform into
   a snapshot and mounts it (``ctr containers create`` has no ``--platform``);
2. ``ctr containers create --rootfs`` on it with the flags ctr has (``--read-only --seccomp
   --net-host --memory-limit``): the spec containerd's defaults give (mounts, masked paths,
   devices, the default seccomp profile), read back (``ctr containers info``) and completed
   as the CRI plugin would from the image configuration and the pod's securityContext;
3. ``ctr run --rm --config``, attached: its exit code, stdout, stderr.

The container's cgroup is a child of one made for the run, whose
``memory.max_usage_in_bytes`` (cgroup v1, hierarchical) still holds the container's peak after
runc removed the child. The kubelet's rule for the termination message
(``FallbackToLogsOnError``) is :attr:`Exited.termination_message`.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.containerd import ContainerdDaemon, CtrError
from tests.support.imageconfig import image_config, kubelet_argv

MiB = 1024 * 1024
NONROOT = 65532
TERMINATION_LOG = "/dev/termination-log"
# The kubelet reads at most this much of the file, and of the log tail in its place.
MESSAGE_MAX = 4096
LOG_TAIL_LINES = 80
CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Container:
    """One container of a pod: the image (a name in containerd), ``args`` after the image's
    entrypoint (or ``command`` in its place), ``env`` added to the image's, host paths bound
    read-only (``volumes``: path in the container -> host path), a kubelet-style secret
    volume (``secrets``: mount path -> {file name: bytes}), the memory limit."""

    image: str
    args: tuple[str, ...] = ()
    command: tuple[str, ...] | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    volumes: Mapping[str, Path] = field(default_factory=dict)
    secrets: Mapping[str, Mapping[str, bytes]] = field(default_factory=dict)
    memory_limit: int = 64 * MiB
    user: tuple[int, int] = (NONROOT, NONROOT)
    platform: str | None = None
    timeout: float = 120.0


@dataclass(frozen=True)
class Exited:
    """How a container ended; ``written`` lists what its writable layer holds besides the
    mount points runc made (empty when the root was read-only)."""

    code: int
    stdout: str
    stderr: str
    termination_log: str
    memory_peak: int
    written: tuple[str, ...]

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @property
    def termination_message(self) -> str:
        """What ``kubectl describe pod`` shows (``FallbackToLogsOnError``): the file, or
        when it is empty and the container failed, the tail of its log."""
        if self.termination_log or self.code == 0:
            return self.termination_log
        tail = "\n".join(self.output.splitlines()[-LOG_TAIL_LINES:])
        return tail[-MESSAGE_MAX:]


class Running:
    """A started container: its :meth:`pid`, :meth:`kill` it, :meth:`wait` for its end."""

    def __init__(
        self, runner: Runner, name: str, work: Path, process: subprocess.Popen[str]
    ) -> None:
        self._runner, self.name, self.work, self.process = runner, name, work, process
        self.upper: Path | None = None  # the snapshot's writable layer
        self.mount_points: set[str] = set()

    def pid(self) -> int:
        """The host PID of the container's PID 1 (``ctr tasks ls``)."""
        for line in self._runner.ctr("tasks", "ls").splitlines()[1:]:
            fields = line.split()
            if fields[:1] == [self.name]:
                return int(fields[1])
        raise CtrError(f"no task {self.name}")

    def kill(self, signal: str = "SIGTERM") -> None:
        """``ctr task kill``: the signal to the container's PID 1, as the kubelet stops it."""
        self._runner.ctr("tasks", "kill", "-s", signal, self.name)

    def wait(self, timeout: float) -> Exited:
        """The container's end (:class:`subprocess.TimeoutExpired` if it has not ended)."""
        stdout, stderr = self.process.communicate(timeout=timeout)
        log = _read_log(self.work)
        return Exited(
            self.process.returncode, stdout, stderr, log, _peak(self.name), self._written()
        )

    def _written(self) -> tuple[str, ...]:
        """What the writable layer holds that is not a mount point (runc makes those before it
        makes the root read-only) or a directory leading to one."""
        if self.upper is None:
            return ()
        allowed = self.mount_points | {
            str(parent) for point in self.mount_points for parent in Path(point).parents
        }
        found = (str(p.relative_to(self.upper)) for p in self.upper.rglob("*"))
        return tuple(sorted(p for p in found if p not in allowed))


class Runner:
    """Runs containers in one containerd namespace; images are imported or pulled into it."""

    def __init__(self, daemon: ContainerdDaemon, namespace: str, scratch: Path) -> None:
        self.daemon, self.ns, self.scratch = daemon, namespace, scratch
        self._configs: dict[tuple[str, str | None], dict[str, Any]] = {}

    def ctr(self, *args: str) -> str:
        return self.daemon.ctr_ok(*args, namespace=self.ns)

    def run(self, container: Container) -> Exited:
        """Run ``container`` to its end (killed after its ``timeout``)."""
        with self.started(container) as running:
            try:
                return running.wait(container.timeout)
            except subprocess.TimeoutExpired:
                running.kill("SIGKILL")
                return running.wait(30)

    @contextlib.contextmanager
    def started(self, container: Container) -> Iterator[Running]:
        """``container`` started; killed if still running, and removed, on the way out."""
        name = f"c{uuid.uuid4().hex[:12]}"
        work = self.scratch / name
        rootfs = work / "rootfs"
        rootfs.mkdir(parents=True)
        template = f"{name}-template"
        try:
            upper = self._mount_image(container, rootfs)
            limit = str(container.memory_limit)
            flags = ["--rootfs", "--read-only", "--seccomp", "--net-host", "--memory-limit", limit]
            self.ctr("containers", "create", *flags, str(rootfs), template)
            info = json.loads(self.ctr("containers", "info", template))
            spec = self._spec(container, info["Spec"], work, f"/{_parent(name)}/{name}")
            (work / "config.json").write_text(json.dumps(spec))
            (CGROUP / "memory" / _parent(name)).mkdir()
            command = [*self._ctr_args(), "run", "--rm", "--config", str(work / "config.json")]
            process = subprocess.Popen(
                [*command, name],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            running = Running(self, name, work, process)
            running.upper = upper
            running.mount_points = {m["destination"].lstrip("/") for m in spec["mounts"]}
            try:
                yield running
            finally:
                if process.poll() is None:
                    with contextlib.suppress(CtrError):
                        running.kill("SIGKILL")
                    process.communicate(timeout=30)
        finally:
            _remove_cgroups(_parent(name))
            self.daemon.run_ctr("containers", "rm", template, namespace=self.ns)
            self.daemon.run_ctr("images", "unmount", "--rm", str(rootfs), namespace=self.ns)
            shutil.rmtree(work, ignore_errors=True)

    def _mount_image(self, container: Container, rootfs: Path) -> Path:
        """The image's snapshot for the container's platform, writable (the runtime makes it
        read-only), mounted at ``rootfs`` (``ctr images mount``, whose key is that path); its
        writable (upper) directory."""
        platform = ["--platform", container.platform] if container.platform else []
        self.ctr("images", "mount", "--rw", *platform, container.image, str(rootfs))
        mounts = shlex.split(self.ctr("snapshots", "mounts", "/", str(rootfs)).strip())
        options = mounts[mounts.index("-o") + 1].split(",") if "-o" in mounts else []
        uppers = [o.split("=", 1)[1] for o in options if o.startswith("upperdir=")]
        if not uppers:
            raise CtrError(f"the snapshot at {rootfs} has no writable layer: {mounts!r}")
        return Path(uppers[0])

    def _ctr_args(self) -> list[str]:
        return [self.daemon.ctr, "--address", str(self.daemon.socket), "--namespace", self.ns]

    def _spec(
        self, container: Container, spec: dict[str, Any], work: Path, cgroup: str
    ) -> dict[str, Any]:
        """The spec ctr wrote for the root, completed as the CRI plugin would from the image
        configuration and the pod."""
        key = (container.image, container.platform)
        if key not in self._configs:
            self._configs[key] = image_config(self, container.image, container.platform)
        config = self._configs[key]
        uid, gid = container.user
        process = spec["process"]
        process["args"] = kubelet_argv(config, container.command, container.args)
        hostname = [e for e in process["env"] if e.startswith("HOSTNAME=")]
        pod_env = [f"{k}={v}" for k, v in container.env.items()]
        process["env"] = [*(config.get("Env") or []), *hostname, *pod_env]
        process["cwd"] = config.get("WorkingDir") or "/"
        process["user"] = {"uid": uid, "gid": gid, "additionalGids": [gid]}
        process["capabilities"] = {key: [] for key in ("bounding", "effective", "permitted")}
        process["noNewPrivileges"] = True  # allowPrivilegeEscalation: false
        spec["root"]["readonly"] = True
        pod = _pod_mounts(container, work)
        replaced = {m["destination"] for m in pod}  # e.g. a pod's own /etc/hosts
        spec["mounts"] = [m for m in spec["mounts"] if m["destination"] not in replaced] + pod
        spec["linux"]["cgroupsPath"] = cgroup
        spec["linux"]["resources"]["memory"] = {"limit": container.memory_limit}
        return spec


def _pod_mounts(container: Container, work: Path) -> list[dict[str, Any]]:
    """The termination-log file (writable, mode 0666 as the kubelet makes it), the secret
    volumes (the kubelet's atomic-writer layout: ``..data`` -> a timestamped directory, each
    key a link through it), and the read-only host paths."""
    log = work / "termination-log"
    log.touch()
    log.chmod(0o666)
    mounts = [_bind(log, TERMINATION_LOG, "rw")]
    for index, (path, files) in enumerate(container.secrets.items()):
        volume = work / f"secret-{index}"
        data = volume / "..2024_01_01_00_00_00.000000001"
        data.mkdir(parents=True)
        (volume / "..data").symlink_to(data.name)
        for key, content in files.items():
            (data / key).write_bytes(content)
            (data / key).chmod(0o444)  # defaultMode: 0444
            (volume / key).symlink_to(f"..data/{key}")
        volume.chmod(0o755)
        data.chmod(0o755)
        mounts.append(_bind(volume, path, "ro"))
    mounts += [_bind(host, path, "ro") for path, host in container.volumes.items()]
    return mounts


def _bind(source: Path, destination: str, mode: str) -> dict[str, Any]:
    options = ["rbind", mode, "nosuid", "nodev"]
    return {"destination": destination, "type": "bind", "source": str(source), "options": options}


def _read_log(work: Path) -> str:
    with (work / "termination-log").open("rb") as file:
        return file.read(MESSAGE_MAX).decode(errors="replace")


def _parent(name: str) -> str:
    """The cgroup made for a run; the container's is its child."""
    return f"imagecheck-test-{name}"


def _peak(name: str) -> int:
    return int((CGROUP / "memory" / _parent(name) / "memory.max_usage_in_bytes").read_text())


def _remove_cgroups(parent: str) -> None:
    """The run's cgroup in every hierarchy runc made it in (its child is gone with the task)."""
    for hierarchy in CGROUP.iterdir():
        with contextlib.suppress(OSError):
            (hierarchy / parent).rmdir()
