"""Throw-away certificates for the integration registries and the token server.

Two separate CAs, because they answer two separate questions:

* the *TLS* CA signs the server certificate (``127.0.0.1`` and ``localhost``) that both the
  HTTPS registries and the token server present; clients trust it through ``ca_file``;
* the *token* CA signs the certificate whose RSA key signs the JWTs. Its certificate is the
  registry's ``auth.token.rootcertbundle``; each JWT carries the signing certificate in its
  ``x5c`` header, and Distribution checks that chain against the bundle
  (``registry/auth/token/token.go``, ``verifyCertChain``).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import trustme

from tests.support.registry import TLSFiles


@dataclass(frozen=True)
class TLSMaterial:
    """PEM files on disk: the CA clients trust, and the server's certificate chain and key."""

    ca_file: Path
    server: TLSFiles

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.server.cert, self.server.key)
        return context

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


@dataclass(frozen=True)
class TokenSigner:
    """The RSA key that signs JWTs, its certificate (DER, for ``x5c``) and the root bundle."""

    private_key_pem: bytes
    cert_der: bytes
    root_bundle: Path


def make_tls_material(directory: Path, names: Iterable[str] = ()) -> TLSMaterial:
    """A CA and a server certificate for 127.0.0.1, localhost and ``names``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="imagecheck test TLS CA")
    leaf = ca.issue_cert("127.0.0.1", "localhost", *names, common_name="127.0.0.1")
    ca_file = directory / "ca.pem"
    cert = directory / "server.pem"
    key = directory / "server-key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    key.write_bytes(leaf.private_key_pem.bytes())
    # The chain (leaf first) so that clients that expect intermediates get them.
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    return TLSMaterial(ca_file=ca_file, server=TLSFiles(cert=cert, key=key))


def make_token_signer(directory: Path) -> TokenSigner:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="imagecheck test token CA", key_type=trustme.KeyType.RSA)
    signer = ca.issue_cert(
        "token-signer.imagecheck.test",
        common_name="imagecheck test token signer",
        key_type=trustme.KeyType.RSA,
    )
    bundle = directory / "token-root.pem"
    ca.cert_pem.write_to_path(str(bundle))
    leaf_pem = signer.cert_chain_pems[0].bytes().decode()
    return TokenSigner(
        private_key_pem=signer.private_key_pem.bytes(),
        cert_der=ssl.PEM_cert_to_DER_cert(leaf_pem),
        root_bundle=bundle,
    )
