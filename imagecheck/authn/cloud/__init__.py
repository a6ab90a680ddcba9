"""Registry credentials from the cloud identity a process already has (EKS, GKE, AKS), with
no credential helper and no cloud SDK: :class:`~imagecheck.authn.cloud._keychain.CloudKeychain`
and the three clouds' sources it imports when a registry host of their cloud is met.

- ``_keychain.py``: which references it answers, the cache and its renewal, single flights;
- ``_hosts.py``: which cloud's registry a host is, exactly (no I/O);
- ``_http.py``: one bounded request to a cloud endpoint;
- AWS: ``_aws.py`` (ECR, ECR Public), ``_awsidentity.py``, ``_awssts.py``,
  ``_awsendpoints.py``, ``_sigv4.py``; Google: ``_google.py``, ``_googlefed.py``,
  ``_googleapi.py``; Azure: ``_azure.py``, ``_azuread.py``.

The face of credentials is :mod:`imagecheck.authn`; nothing here is imported before a run
meets a cloud's registry, but the keychain and the host test.
"""
