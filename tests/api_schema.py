"""Checks an /api/ answer against the OpenAPI document published at /api/openapi.json.

tests/conftest.py runs every answer the suite gets from django.test.Client through this, so
the published schema cannot drift from what the views really answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

BASE = "urn:floodgate:openapi"
FORMATS = FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    # jsonschema leaves date-time unchecked without an optional package; the API writes
    # isoformat() with an offset, which is what RFC 3339 asks for.
    return not isinstance(value, str) or datetime.fromisoformat(value).tzinfo is not None


class SchemaMismatch(AssertionError):
    """An answer the published schema does not describe: the test that got it fails."""


def _pointer(*parts: str) -> str:
    return "/" + "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


class ApiSchema:
    """One OpenAPI 3.1 document, ready to check answers against."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc
        # The whole document is one resource, so "#/components/..." resolves from anywhere in it.
        resource = Resource.from_contents(doc, default_specification=DRAFT202012)
        self.registry: Registry = Registry().with_resource(BASE, resource)
        self.paths = [
            (re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"), template)
            for template in doc["paths"]
        ]
        self.checked = 0

    def validate(self, instance: object, pointer: str) -> None:
        """Validate `instance` against the schema at `pointer` in the document; raises ValidationError."""
        validator = Draft202012Validator(
            {"$ref": f"{BASE}#{pointer}"}, registry=self.registry, format_checker=FORMATS
        )
        error = best_match(validator.iter_errors(instance))
        if error is not None:
            raise error

    def template_for(self, path: str) -> str | None:
        return next((template for regex, template in self.paths if regex.match(path)), None)

    def check(self, *, method: str, path: str, status: int, content_type: str, body: bytes) -> None:
        """Raise SchemaMismatch unless the document describes this status and this body."""
        where = f"{method} {path} -> {status}"
        head = method == "HEAD"  # answers as GET, without a body
        template = self.template_for(path)
        operation = self.doc["paths"][template].get(method.lower()) if template else None
        if method == "HEAD" and template and operation is None:
            operation = self.doc["paths"][template].get("get")  # HEAD answers as GET, without a body
            method = "GET"
        if operation is None:
            # Documented fallback: any other path is 404, any other method 405, both an Error.
            expected = 404 if template is None else 405
            if status != expected:
                raise SchemaMismatch(f"{where}: the schema has no such operation (expected {expected})")
            pointer = _pointer("components", "schemas", "Error")
        else:
            assert template is not None  # the operation was found under it
            responses = operation["responses"]
            if str(status) not in responses:
                raise SchemaMismatch(f"{where}: the schema lists only {sorted(responses)}")
            content = responses[str(status)].get("content", {})
            if head or (not body and not content):
                self.checked += 1
                return
            if "application/json" not in content:
                raise SchemaMismatch(f"{where}: the schema describes no JSON body for this answer")
            pointer = _pointer(
                "paths",
                template,
                method.lower(),
                "responses",
                str(status),
                "content",
                "application/json",
                "schema",
            )
        if content_type.split(";")[0].strip() != "application/json":
            raise SchemaMismatch(f"{where}: answered {content_type!r}, the schema says application/json")
        try:
            instance = json.loads(body)
        except ValueError as error:
            raise SchemaMismatch(f"{where}: the body is not JSON: {error}") from None
        try:
            self.validate(instance, pointer)
        except ValidationError as error:
            at = "/".join(str(p) for p in error.absolute_path) or "(the body)"
            raise SchemaMismatch(f"{where}: at {at}: {error.message}\nbody: {instance}") from None
        self.checked += 1
