"""Who sent a received message: SPF, DKIM and DMARC, as one AuthenticationResults
(pipelines/core/documents.py). DNS comes through the `resolver` a caller hands in."""

from __future__ import annotations

from typing import Any

from pipelines.core.documents import AuthenticationResults


async def authenticate(raw: bytes, *, client_ip: str, helo: str, mail_from: str,
                       resolver: Any) -> AuthenticationResults:
    """Interface first (issue 36): every verdict "none" until the evaluators land."""
    domain = mail_from.rpartition("@")[2] or helo
    return {"spf": {"result": "none", "domain": domain}, "dkim": [],
            "dmarc": {"result": "none", "policy": None, "domain": "", "aligned_spf": False, "aligned_dkim": False},
            "summary": f"spf=none smtp.mailfrom={domain}; dkim=none; dmarc=none"}
