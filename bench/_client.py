"""Preloaded by the forkserver of bench.claims: Django is set up once, and every client
process forks from it ready, instead of 64 processes importing it on 2 cores.

It must not import bench.claims: each child runs the bench's main module again as
__mp_main__ (runpy), which warns (RuntimeWarning) when that module is already imported.
"""

from __future__ import annotations

from bench._django import setup_django

setup_django()
