"""DKIM key material for the render step (not a queue): the verified custom domains'
keys and the service's own key for the shared domain, opened into signers.

The shared key is created on first use and kept sealed in `service_keys`; `postroom dkim`
prints the TXT record to publish for it."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import domains, service_keys
from pipelines.core.settings import Settings
from pipelines.domains.dns_records import SELECTOR
from pipelines.messages import dkim

SHARED_KEY_NAME = "dkim:shared"


async def shared_key(db: AsyncDatabase, settings: Settings) -> dict:
    def make() -> dict:
        sealed, public_b64 = dkim.new_sealed_key(settings.secret_key)
        return {"selector": SELECTOR, "private_key": sealed, "public_key": public_b64}
    return await service_keys.get_or_create(db, SHARED_KEY_NAME, make)


async def signers_for(db: AsyncDatabase, settings: Settings,
                      messages: list[dict]) -> tuple[dict[str, dkim.Signer], dict[str, str]]:
    """The signers the messages need, and the verified return-path hosts of their custom
    domains (both keyed by `pipelines.messages.dkim.signer_key`)."""
    signers: dict[str, dkim.Signer] = {}
    return_paths: dict[str, str] = {}
    custom = {(m["workspace_id"], m["signing_domain"]) for m in messages if m.get("custom_domain")}
    for (workspace_id, domain), key in (await domains.signing_keys(db, custom)).items():
        signers[f"{workspace_id}:{domain}"] = dkim.open_signer(domain, key["selector"], key["sealed"],
                                                               settings.secret_key)
        if key["return_path"]:
            return_paths[f"{workspace_id}:{domain}"] = key["return_path"]
    if any(not m.get("custom_domain") for m in messages):
        key = await shared_key(db, settings)
        signers[dkim.SHARED] = dkim.open_signer(settings.shared_domain, key["selector"],
                                                key["private_key"], settings.secret_key)
    return signers, return_paths
