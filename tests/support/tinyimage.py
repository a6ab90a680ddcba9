"""The smallest image a runtime can run: one layer holding one static x86-64 program that
writes a line and exits 0, made here byte by byte (no compiler, no libc: 120 bytes of ELF
header, 33 of code). The pod harness's main container, and the runtime's floor in
benchmarks/runc_start.py.
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import tarfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.images import OCI_CONFIG, OCI_LAYER, digest_of, push_blob, push_manifest

PROGRAM = "/hello"
BASE = 0x400000
HEADERS = 64 + 56  # the ELF header and one program header
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def static_program(message: bytes) -> bytes:
    """An x86-64 Linux ELF executable: ``write(1, message)``, then ``exit(0)``."""
    code = (
        b"\xb8\x01\x00\x00\x00"  # mov eax, 1 (write)
        b"\xbf\x01\x00\x00\x00"  # mov edi, 1
        b"\x48\x8d\x35\x10\x00\x00\x00"  # lea rsi, [rip + 16]: the message after the code
        + b"\xba"
        + struct.pack("<I", len(message))  # mov edx, len
        + b"\x0f\x05"  # syscall
        b"\xb8\x3c\x00\x00\x00"  # mov eax, 60 (exit)
        b"\x31\xff"  # xor edi, edi
        b"\x0f\x05"  # syscall
    )
    size = HEADERS + len(code) + len(message)
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    header = struct.pack(
        "<16sHHIQQQIHHHHHH", ident, 2, 0x3E, 1, BASE + HEADERS, 64, 0, 0, 64, 56, 1, 0, 0, 0
    )
    segment = struct.pack("<IIQQQQQQ", 1, 5, 0, BASE, BASE, size, size, 0x1000)
    return header + segment + code + message


@dataclass(frozen=True)
class TinyImage:
    """The image's blobs: its manifest, config and (gzip) layer, and their digests."""

    manifest: bytes
    config: bytes
    layer: bytes

    @classmethod
    def build(cls, message: bytes) -> TinyImage:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as tar:
            program = static_program(message)
            info = tarfile.TarInfo(PROGRAM.lstrip("/"))
            info.size, info.mode = len(program), 0o755
            tar.addfile(info, io.BytesIO(program))
        layer = gzip.compress(raw.getvalue(), mtime=0)
        config = json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"Entrypoint": [PROGRAM]},
                "rootfs": {"type": "layers", "diff_ids": [digest_of(raw.getvalue())]},
            }
        ).encode()
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": _descriptor(OCI_CONFIG, config),
                "layers": [_descriptor(OCI_LAYER, layer)],
            }
        ).encode()
        return cls(manifest, config, layer)

    @property
    def digests(self) -> set[str]:
        return {digest_of(blob) for blob in (self.manifest, self.config, self.layer)}

    def push(self, client: httpx.Client, base_url: str, repo: str, tag: str) -> None:
        for blob in (self.layer, self.config):
            push_blob(client, base_url, repo, blob)
        push_manifest(client, base_url, repo, tag, self.manifest, OCI_MANIFEST)

    def write_archive(self, path: Path, name: str) -> None:
        """An OCI archive (what ``ctr images import`` reads), the image named ``name``."""
        entry = _descriptor(OCI_MANIFEST, self.manifest)
        entry["annotations"] = {"org.opencontainers.image.ref.name": name}
        files = {
            "oci-layout": b'{"imageLayoutVersion": "1.0.0"}',
            "index.json": json.dumps({"schemaVersion": 2, "manifests": [entry]}).encode(),
        }
        for blob in (self.manifest, self.config, self.layer):
            files[f"blobs/sha256/{digest_of(blob).removeprefix('sha256:')}"] = blob
        with tarfile.open(path, "w") as tar:
            for name_in_tar, data in files.items():
                info = tarfile.TarInfo(name_in_tar)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def _descriptor(media_type: str, data: bytes) -> dict[str, object]:
    return {"mediaType": media_type, "digest": digest_of(data), "size": len(data)}
