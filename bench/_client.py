"""Preloaded by the forkserver of bench.claims: Django is set up once, and every client
process forks from it ready, instead of 64 processes importing it on 2 cores."""

from __future__ import annotations

from bench.claims import setup_django

setup_django()
