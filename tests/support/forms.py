"""Forms in tests: create one over the API, post to its public endpoint, find the
confirmation link in the email the sink received."""

from __future__ import annotations

import re
import uuid

import httpx


def make_form(tenant, **fields) -> dict:
    body = {"name": f"Signup {uuid.uuid4().hex[:6]}", **fields}
    response = tenant.post("/forms", json=body)
    assert response.status_code == 201, response.text
    return response.json()["data"]


def post_json(form: dict, body: dict, token: str | None = None, **headers) -> httpx.Response:
    payload = {"token": form["embed"]["token"] if token is None else token, **body}
    return httpx.post(form["embed"]["action"], json=payload, headers=headers, timeout=30)


def post_form(form: dict, body: dict, token: str | None = None, **kwargs) -> httpx.Response:
    """What a browser posting an HTML form sends (and answers with a page)."""
    data = {"token": form["embed"]["token"] if token is None else token, **body}
    return httpx.post(form["embed"]["action"], data=data, headers={"Accept": "text/html"}, timeout=30, **kwargs)


def unique_email(tag: str = "signup") -> str:
    return f"{tag}-{uuid.uuid4().hex[:10]}@forms.example"


def confirmation_link(received) -> str:
    return re.search(r'href="([^"]+/f/confirm/[^"]+)"', received.body("html")).group(1)
