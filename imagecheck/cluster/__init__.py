"""Cluster mode (issue #15): ``imagecheck reap`` (fail Jobs whose pods wait on an image the
registry says is missing) and ``imagecheck audit`` (every workload's images, checked).

Installed with the ``cluster`` extra (``pip install 'imagecheck[cluster]'``), kept out of the
initContainer image. The modules:

    model.py   the objects and the ``Cluster`` interface the commands are written against
    api.py     ``Cluster`` over the Kubernetes API (lightkube): kubeconfig or in-cluster
    bounds.py  caps on what the API sends, before lightkube reads it
    reap.py    which stuck pods to act on, and what to do (pure: objects in, actions out)
    audit.py   workloads and their images, checked once per distinct image
    exporter.py  audit --serve's metrics (k8s-image-availability-exporter's names)
    serve.py   audit --serve: an audit every interval, /metrics, /healthz, /readyz (aiohttp)
    limits.py  audit --serve's defaults, without the extra's imports
"""
