"""Write the multi-arch imagecheck image as an OCI image layout (issue #16).

    ocilayout.py --config CONFIG.json --out DIR --tag TAG linux/amd64=ROOT linux/arm64=ROOT

One image per platform, each a single layer (its root filesystem as a tar, gzip-compressed)
with the runtime configuration of ``CONFIG.json`` (the amd64 image's OCI config as buildah
inspects it: entrypoint, user, environment, labels) and that platform's ``architecture``; then
an OCI image index naming both, which ``DIR/index.json`` tags as ``TAG``. Layout spec:
https://github.com/opencontainers/image-spec/blob/main/image-layout.md

The bytes depend only on the inputs (sorted entries, fixed mtimes, gzip without a timestamp),
so a rebuild of the same roots gives the same digests. Prints each platform's uncompressed and
compressed layer size as JSON (the image size test reads it).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
# The runtime settings taken from the amd64 image's config; the rest is per platform.
RUNTIME_KEYS = ("Entrypoint", "Cmd", "Env", "User", "WorkingDir", "Labels", "StopSignal")
MTIME = 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tag", default="latest")
    parser.add_argument("roots", nargs="+", metavar="OS/ARCH=ROOT")
    args = parser.parse_args()
    runtime = json.loads(args.config.read_text()).get("config", {})
    layout = Layout(args.out)
    entries, sizes = [], {}
    for item in args.roots:
        platform, root = item.split("=", 1)
        entry, sizes[platform] = layout.add_image(platform, Path(root), runtime)
        entries.append(entry)
    layout.finish(entries, args.tag)
    print(json.dumps(sizes, indent=2))


class Layout:
    def __init__(self, out: Path) -> None:
        self.blobs = out / "blobs" / "sha256"
        self.blobs.mkdir(parents=True)
        (out / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        self.out = out

    def add_image(
        self, platform: str, root: Path, runtime: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, int]]:
        os_name, arch = platform.split("/", 1)
        tar = layer_tar(root)
        layer = gzip.compress(tar, compresslevel=9, mtime=0)
        config = {
            "architecture": arch,
            "os": os_name,
            "config": {k: runtime[k] for k in RUNTIME_KEYS if runtime.get(k)},
            "rootfs": {"type": "layers", "diff_ids": [_digest(tar)]},
            "history": [{"created_by": f"imagecheck docker/ocilayout.py ({platform})"}],
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": self.blob(OCI_CONFIG, _dumps(config)),
            "layers": [self.blob(OCI_LAYER, layer)],
        }
        entry = self.blob(OCI_MANIFEST, _dumps(manifest))
        entry["platform"] = {"os": os_name, "architecture": arch}
        return entry, {"uncompressed": len(tar), "compressed": len(layer)}

    def finish(self, entries: list[dict[str, Any]], tag: str) -> None:
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
        top = self.blob(OCI_INDEX, _dumps(index))
        top["annotations"] = {"org.opencontainers.image.ref.name": tag}
        (self.out / "index.json").write_bytes(
            _dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [top]})
        )

    def blob(self, media_type: str, data: bytes) -> dict[str, Any]:
        digest = _digest(data)
        (self.blobs / digest.removeprefix("sha256:")).write_bytes(data)
        return {"mediaType": media_type, "digest": digest, "size": len(data)}


def layer_tar(root: Path) -> bytes:
    """``root`` as a layer: every entry, sorted, owners and modes kept, fixed mtimes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _walk(root):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
            info.mtime = MTIME
            info.uname = info.gname = ""
            if info.isreg():
                with path.open("rb") as file:
                    tar.addfile(info, file)
            else:
                tar.addfile(info)
    return buffer.getvalue()


def _walk(root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        here = Path(dirpath)
        found += [here / name for name in sorted(dirnames + filenames)]
    return sorted(found, key=lambda p: p.relative_to(root).parts)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


if __name__ == "__main__":
    main()
