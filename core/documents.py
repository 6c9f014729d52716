"""A published JSON document a checking command reads from where a buyer saved or found it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

READ_ERRORS = (OSError, ValueError, httpx.HTTPError)  # what reading one may raise


def read_json(source: str) -> object:
    """The JSON at an http(s) URL, else in the file at that path; raises one of READ_ERRORS."""
    if source.startswith(("http://", "https://")):
        answer = httpx.get(source, timeout=10)
        answer.raise_for_status()
        return answer.json()
    return json.loads(Path(source).read_text())
