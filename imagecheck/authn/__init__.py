"""Credentials: where they come from and how they are chosen for a registry.

A :class:`Keychain` answers one question, the credentials for a registry host (or none).
Every source is one: flags (:class:`StaticKeychain`), Docker's ``config.json`` and podman's
``auth.json`` (:class:`AuthsKeychain`), credential helpers (:class:`CredentialHelpers`),
Kubernetes pull secrets (:class:`PullSecretKeychain`), the kubelet's credential provider
plugins (:class:`CredentialProviders`), the cloud identities (:class:`CloudKeychain`);
:func:`default_keychain` composes them
in the order the tools users know apply them, and :class:`AnonymousKeychain` is the explicit
fall-back. Nothing here sends a request to a registry.
"""

from __future__ import annotations

from imagecheck._lazy import lazy_face

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "AnonymousKeychain": "imagecheck.authn._credentials",
    "ChainKeychain": "imagecheck.authn._credentials",
    "CloudKeychain": "imagecheck.authn.cloud._keychain",
    "CredentialProviders": "imagecheck.authn._credproviders",
    "Credentials": "imagecheck.authn._credentials",
    "Keychain": "imagecheck.authn._credentials",
    "SharedSources": "imagecheck.authn._default",
    "PullSecretKeychain": "imagecheck.authn._pullsecrets",
    "bearer_problem": "imagecheck.authn._credentials",
    "default_keychain": "imagecheck.authn._default",
    "shared_sources": "imagecheck.authn._default",
    "resolve_credentials": "imagecheck.authn._credentials",
    "unanswered": "imagecheck.authn._credentials",
}

if TYPE_CHECKING:
    from imagecheck.authn._credentials import (
        AnonymousKeychain,
        ChainKeychain,
        Credentials,
        Keychain,
        bearer_problem,
        resolve_credentials,
        unanswered,
    )
    from imagecheck.authn._credproviders import CredentialProviders
    from imagecheck.authn._default import SharedSources, default_keychain, shared_sources
    from imagecheck.authn._pullsecrets import PullSecretKeychain
    from imagecheck.authn.cloud._keychain import CloudKeychain

if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())


__all__ = [
    "AnonymousKeychain",
    "ChainKeychain",
    "CloudKeychain",
    "CredentialProviders",
    "Credentials",
    "Keychain",
    "PullSecretKeychain",
    "SharedSources",
    "bearer_problem",
    "default_keychain",
    "resolve_credentials",
    "shared_sources",
    "unanswered",
]
