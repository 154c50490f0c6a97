"""Change a contact: PATCH /contacts/:id, and a form signup filling in what the contact
lacks (pipelines/workflows/form_signup.py). The write is mongo/contacts.update (a compare-and-set that
merges attributes); here its refusals become the API's answers."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import contacts
from pipelines.core.errors import ValidationFailed


async def update(db: AsyncDatabase, workspace_id: str, contact_id: str, *, fields: dict, attributes: dict,
                 max_attributes: int) -> dict | None:
    """The contact with `fields` set and `attributes` merged (a null value removes that
    attribute); None when the new email is another live contact's; 400 at `attributes`
    when the merged attributes would be more than `max_attributes`."""
    outcome = await contacts.update(
        db, workspace_id, contact_id, fields=fields,
        set_attributes={k: v for k, v in attributes.items() if v is not None},
        unset_attributes=[k for k, v in attributes.items() if v is None], max_attributes=max_attributes)
    if outcome is contacts.Refusal.TOO_MANY_ATTRIBUTES:
        raise ValidationFailed(f"attributes: a contact has at most {max_attributes} attributes "
                               "(null removes one).", path="attributes")
    return None if outcome is contacts.Refusal.EMAIL_TAKEN else outcome
