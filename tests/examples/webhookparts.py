"""What the example tests of ``serve``'s webhook and ``gate`` share: finding objects, a pod's
ports, mounts and secrets as the kubelet joins them, label selectors as the API applies them,
and the part of cert-manager's CRD schemas the examples use."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest

from tests.examples.manifests import Json, optional_module
from tests.support.tools import skip_or_fail

CERT_MANAGER = "cert-manager.io/v1"
INJECT_CA_FROM = "cert-manager.io/inject-ca-from"

jsonschema = optional_module("jsonschema")


def find(objects: list[Json], kind: str, name: str | None = None) -> Json:
    """The one object of ``kind`` (named ``name``, if given)."""
    found = [o for o in objects if o.get("kind") == kind and name in (None, meta(o).get("name"))]
    assert len(found) == 1, f"expected one {kind}{'/' + name if name else ''}, got {len(found)}"
    return found[0]


def meta(body: Json) -> Json:
    meta: Json = body.get("metadata") or {}
    return meta


def selects(selector: Json, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions) applied to ``labels``."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, values = expression["key"], expression.get("values") or []
        present = key in labels
        matched = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }[expression["operator"]]
        if not matched:
            return False
    return True


def container_port(container: Json, port: int | str) -> int:
    """A port given by number or by name, as the container declares it."""
    for declared in container.get("ports") or []:
        if port in (declared.get("name"), declared.get("containerPort")):
            return int(declared["containerPort"])
    pytest.fail(f"the container declares no port {port!r}", pytrace=False)


def listen_port(params: dict[str, Any]) -> int:
    return int(str(params["listen"]).rpartition(":")[2])


def mount_of(container: Json, path: str) -> Json:
    """The one volume mount that holds ``path``."""
    mounts = [
        m
        for m in container.get("volumeMounts") or []
        if PurePosixPath(m["mountPath"]) in (PurePosixPath(path), *PurePosixPath(path).parents)
    ]
    assert len(mounts) == 1, f"{path} is not mounted"
    mount: Json = mounts[0]
    return mount


def secret_volume(pod: Json, mount: Json) -> str:
    """The name of the secret behind a volume mount."""
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    secret = volumes[mount["name"]].get("secret") or {}
    assert secret.get("secretName"), f"{mount['mountPath']}: not a secret volume"
    return str(secret["secretName"])


# --- cert-manager objects: the part of the cert-manager.io/v1 CRD schemas the example uses ---
#
# From cert-manager's deploy/crds (certificates.cert-manager.io, issuers.cert-manager.io), cut
# down to the fields used here and made strict: a field not listed fails, so a new one is added
# here from the CRD, not guessed. Issuer types other than selfSigned and ca are left out.

_STRINGS = {"type": "array", "items": {"type": "string"}}
_GO_DURATION = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
_USAGES = [
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime",
    "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
    "microsoft sgc", "netscape sgc",
]  # fmt: skip


def _strict(properties: Json, required: tuple[str, ...] = ()) -> Json:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_CERTIFICATE_SPEC = _strict(
    {
        "secretName": {"type": "string", "minLength": 1},
        "issuerRef": _strict(
            {"name": {"type": "string"}, "kind": {"type": "string"}, "group": {"type": "string"}},
            required=("name",),
        ),
        "isCA": {"type": "boolean"},
        "commonName": {"type": "string", "maxLength": 64},
        "dnsNames": _STRINGS,
        "ipAddresses": _STRINGS,
        "duration": _GO_DURATION,
        "renewBefore": _GO_DURATION,
        "usages": {"type": "array", "items": {"enum": _USAGES}},
        "privateKey": _strict(
            {
                "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                "encoding": {"enum": ["PKCS1", "PKCS8"]},
                "rotationPolicy": {"enum": ["Never", "Always"]},
                "size": {"type": "integer"},
            }
        ),
        "revisionHistoryLimit": {"type": "integer", "minimum": 1},
    },
    required=("issuerRef", "secretName"),
)
_ISSUER_SPEC = {
    **_strict(
        {
            "selfSigned": _strict({"crlDistributionPoints": _STRINGS}),
            "ca": _strict(
                {
                    "secretName": {"type": "string", "minLength": 1},
                    "crlDistributionPoints": _STRINGS,
                    "issuingCertificateURLs": _STRINGS,
                    "ocspServers": _STRINGS,
                },
                required=("secretName",),
            ),
        }
    ),
    # cert-manager's own admission webhook refuses an Issuer with no type, or with two.
    "minProperties": 1,
    "maxProperties": 1,
}
_METADATA = _strict(
    {
        "name": {"type": "string", "minLength": 1},
        "namespace": {"type": "string", "minLength": 1},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    # Issuer (not ClusterIssuer) and Certificate are namespaced: cert-manager issues into the
    # namespace the webhook reads its secret from.
    required=("name", "namespace"),
)
CERT_MANAGER_SCHEMAS = {
    kind: _strict(
        {
            "apiVersion": {"const": CERT_MANAGER},
            "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": spec,
        },
        required=("apiVersion", "kind", "metadata", "spec"),
    )
    for kind, spec in (("Certificate", _CERTIFICATE_SPEC), ("Issuer", _ISSUER_SPEC))
}


def check_cert_manager(body: Json) -> None:
    if jsonschema is None:
        skip_or_fail("jsonschema is not installed (it comes with kubernetes-validate)")
    schema = CERT_MANAGER_SCHEMAS.get(str(body.get("kind")))
    assert schema is not None, f"{body.get('kind')}: not a kind this example should use"
    try:
        jsonschema.Draft202012Validator(schema).validate(body)
    except jsonschema.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path) or "(top level)"
        pytest.fail(f"{body['kind']}/{meta(body).get('name')}: {where}: {exc.message}")


def go_duration_hours(text: str) -> float:
    """``2160h``, ``90m``, ``1h30m`` in hours: enough of Go's ParseDuration for these files."""
    units = {"h": 1.0, "m": 1 / 60, "s": 1 / 3600}
    total, number = 0.0, ""
    for char in text:
        if char.isdigit() or char == ".":
            number += char
        else:
            total += float(number) * units[char]
            number = ""
    assert not number, f"{text}: a number without a unit"
    return total
