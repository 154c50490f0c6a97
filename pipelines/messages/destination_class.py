"""A destination domain's class for metrics: a handful of large mailbox providers by name,
everything else `other`, so a label never grows with the audience."""

from __future__ import annotations

_PROVIDERS = {
    "google": ("gmail.com", "googlemail.com"),
    "microsoft": ("outlook.com", "hotmail.com", "live.com", "msn.com"),
    "yahoo": ("yahoo.com", "ymail.com", "aol.com"),
    "apple": ("icloud.com", "me.com", "mac.com"),
}
_BY_DOMAIN = {domain: name for name, domains in _PROVIDERS.items() for domain in domains}


def domain_class(address: str) -> str:
    domain = address.rpartition("@")[2].lower().rstrip(".")
    if domain in _BY_DOMAIN:
        return _BY_DOMAIN[domain]
    # national variants (yahoo.co.uk, hotmail.fr, …)
    label = domain.split(".")[0] if domain else ""
    for name, domains in _PROVIDERS.items():
        if any(label == d.split(".")[0] for d in domains):
            return name
    return "other"
