"""Checks a live answer against what the served OpenAPI document (/openapi.json, the
same document as /openapi.yaml) says the operation answers:
the schema of its status (or `default`) for its method and path. Used on every API
answer the tests get (tests/support/harness.py), so a view and its documented model
cannot drift apart unnoticed."""

from __future__ import annotations

import json
import re

import httpx
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

_BASE = "urn:postroom:openapi"


class Conformance:
    def __init__(self, document: dict):
        self.document = document
        self.registry = Registry().with_resource(_BASE, Resource(contents=document, specification=DRAFT202012))
        self.routes = []
        for template, operations in document["paths"].items():
            pattern = re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")
            # a fixed segment wins over a variable one (`/webhooks/triggers` over `/webhooks/{id}`)
            self.routes.append((template.count("{"), pattern, template, operations))
        self.routes.sort(key=lambda r: r[0])
        self.validators: dict[tuple[str, str, str], Draft202012Validator] = {}

    @classmethod
    def fetch(cls, base_url: str) -> Conformance:
        # The JSON form of the same document: YAML (pure-Python dump on the front, load
        # here) cost every new stack's first request about 2 s.
        return cls(httpx.get(base_url + "/openapi.json", timeout=30).json())

    def operation(self, method: str, path: str) -> tuple[str, dict] | None:
        for _, pattern, template, operations in self.routes:
            if pattern.match(path) and method.lower() in operations:
                return template, operations[method.lower()]
        return None

    def problems(self, method: str, path: str, status: int, body) -> list[str]:
        """What is wrong with `body` as the answer `status` of `method path`; [] when it
        conforms (or the path is not a documented operation)."""
        found = self.operation(method, path)
        if found is None:
            return []
        template, operation = found
        code = str(status) if str(status) in operation["responses"] else "default"
        key = (method.lower(), template, code)
        if key not in self.validators:
            content = operation["responses"].get(code, {}).get("content", {}).get("application/json")
            if content is None:
                return [f"{method} {template}: status {status} is not documented"]
            schema = json.loads(json.dumps(content["schema"]).replace('"#/components/', f'"{_BASE}#/components/'))
            self.validators[key] = Draft202012Validator(schema, registry=self.registry)
        return [f"{method} {template} {status}: {'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}"
                for e in self.validators[key].iter_errors(body)]
