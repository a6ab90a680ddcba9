"""``imagecheck serve``: a validating admission webhook that refuses workloads whose images do
not exist, before the scheduler allocates anything.

- ``review``: AdmissionReview in, images out, AdmissionReview response back (pure)
- ``cache``: results shared across reviews, with TTLs and one registry request per image
- ``server``: the aiohttp HTTPS server, certificate reload, health, metrics, JSON logs
- ``listener``: accepting connections: a cap, and time limits for slow clients
- ``limits``: the defaults for hostile clients and big reviews (no aiohttp import)

It needs the ``webhook`` extra (``pip install 'imagecheck[webhook]'``); the initContainer
image does not carry it.
"""
