"""Test support: a real local registry (:mod:`tests.support.registry`) and images to fill it
with (:mod:`tests.support.images`).

Used by the integration and image tests, the benchmarks and the demo (``make demo``,
``scripts/demo.py``); not part of the installed package. Stdlib, httpx and imagecheck only,
so importing it never needs the test extras.
"""
