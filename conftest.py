"""Root conftest: the doctests inside pinqpy/ (``--doctest-modules``) use ``pq.testing``
hooks, which work only behind the ``PINQPY_TESTING=1`` switch; set it before pinqpy is
imported. ``tests/conftest.py`` sets it too, for runs rooted elsewhere."""

import os

os.environ.setdefault("PINQPY_TESTING", "1")
