"""One blueprint module per resource group; a blueprint is named after its permission area."""

import importlib

# Modules providing `bp`; features add theirs here.
BLUEPRINT_MODULES = [
    "front.routes.health",
    "front.routes.api_key",
    "front.routes.email",
    "front.routes.contacts",
    "front.routes.tags",
    "front.routes.lists",
    "front.routes.segments",
    "front.routes.webhooks",
    "front.routes.templates",
    "front.routes.domains",
    "front.routes.suppressions",
    "front.routes.bounces",
    "front.routes.analytics",
    "front.routes.campaigns",
    "front.routes.tracking",
    "front.routes.conversions",
    "front.routes.automations",
    "front.routes.pages",
    "front.routes.forms",
    "front.routes.form_pages",
]


def register_all(app) -> None:
    for name in BLUEPRINT_MODULES:
        module = importlib.import_module(name)
        app.register_blueprint(module.bp)
