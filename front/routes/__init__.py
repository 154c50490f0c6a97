"""One blueprint module per resource group; a blueprint is named after its permission area."""

from .. import console
from . import (
    analytics,
    api_key,
    automations,
    bounces,
    campaigns,
    contacts,
    conversions,
    domains,
    email,
    form_pages,
    forms,
    health,
    inbound,
    lists,
    pages,
    segments,
    suppressions,
    tags,
    templates,
    tracking,
    webhooks,
)

# Registered in this order; a feature adds its blueprint here.
BLUEPRINTS = [health.bp, api_key.bp, email.bp, contacts.bp, tags.bp, lists.bp, segments.bp, webhooks.bp,
              templates.bp, domains.bp, suppressions.bp, bounces.bp, analytics.bp, campaigns.bp, tracking.bp,
              conversions.bp, automations.bp, inbound.bp, pages.bp, forms.bp, form_pages.bp, console.bp]


def register_all(app) -> None:
    for bp in BLUEPRINTS:
        app.register_blueprint(bp)
