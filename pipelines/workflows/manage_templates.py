"""A template's commands (POST, PATCH and DELETE /templates…, restoring a version). Every
content change is a new version (mongo/templates.update keeps the old one); the route has
checked and, when asked, rendered the content."""

from __future__ import annotations

from pymongo.asynchronous.database import AsyncDatabase

from mongo import templates
from pipelines.core.documents import Template, TemplateVersion


async def create(db: AsyncDatabase, workspace_id: str, content: dict) -> Template:
    return await templates.create(db, workspace_id, content)


async def update(db: AsyncDatabase, workspace_id: str, template_id: str, changes: dict) -> Template | None:
    """The template at its new version; None when there is no live template."""
    return await templates.update(db, workspace_id, template_id, changes)


async def restore_version(db: AsyncDatabase, workspace_id: str, template_id: str,
                          version: TemplateVersion) -> Template | None:
    """The template with the content of its stored `version`, as a new version saying where it came from."""
    changes = {k: version.get(k) for k in templates.CONTENT_FIELDS}
    return await templates.update(db, workspace_id, template_id, changes, restored_from=version["version"])


async def delete(db: AsyncDatabase, workspace_id: str, template_id: str) -> bool:
    return await templates.soft_delete(db, workspace_id, template_id)
