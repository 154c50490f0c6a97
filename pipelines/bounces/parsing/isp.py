"""Which mailbox provider a report concerns: from the reporting MTA, then the
recipient's domain. Unknown providers are named by the recipient's domain."""

from __future__ import annotations

from pipelines.bounces.parsing.model import Bounce

# domain suffix → provider name
PROVIDERS = {
    "gmail.com": "gmail", "googlemail.com": "gmail", "google.com": "gmail",
    "outlook.com": "outlook", "hotmail.com": "outlook", "live.com": "outlook", "msn.com": "outlook",
    "microsoft.com": "outlook", "office365.com": "outlook",
    "yahoo.com": "yahoo", "yahoodns.net": "yahoo", "ymail.com": "yahoo", "yahoo.co.uk": "yahoo",
    "aol.com": "aol", "icloud.com": "icloud", "me.com": "icloud", "mac.com": "icloud",
}


def provider_of(host: str) -> str | None:
    host = (host or "").lower().strip().rstrip(".")
    if ";" in host:  # "dns; mx.google.com"
        host = host.split(";", 1)[1].strip()
    labels = host.split(".")
    for size in range(len(labels), 1, -1):
        name = PROVIDERS.get(".".join(labels[-size:]))
        if name:
            return name
    return None


def with_isp(bounce: Bounce) -> Bounce:
    if bounce.isp_name:
        return bounce
    domain = bounce.email.rsplit("@", 1)[-1].lower()
    return bounce.replace(isp_name=provider_of(bounce.reporting_mta) or provider_of(domain) or domain)
