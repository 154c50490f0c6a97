"""Actor modules added by later features register here, so the worker boot imports them."""

import importlib

MODULES: list[str] = ["actors.webhooks", "actors.campaigns", "actors.imports", "actors.automations"]


def load() -> None:
    for name in MODULES:
        importlib.import_module(name)
