"""What the app keeps for its lifetime: settings, the store handle (created in the
lifespan, on the serving loop), and the request's caller."""

from __future__ import annotations

import dataclasses

from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from quart import current_app, g

from pipelines.core.settings import Settings

from .body_parsing import BodyParsers


@dataclasses.dataclass
class FrontRuntime:
    settings: Settings
    client: AsyncMongoClient | None = None
    db: AsyncDatabase | None = None
    body_parsers: BodyParsers = dataclasses.field(default_factory=BodyParsers)


def runtime() -> FrontRuntime:
    return current_app.extensions["postroom"]


def db() -> AsyncDatabase:
    return runtime().db


def settings() -> Settings:
    return runtime().settings


@dataclasses.dataclass(frozen=True)
class Caller:
    """The authenticated API key and its workspace."""
    key: dict
    workspace: dict

    @property
    def workspace_id(self) -> str:
        return self.workspace["_id"]

    @property
    def key_id(self) -> str:
        return self.key["_id"]

    @property
    def sandbox(self) -> bool:
        return self.key["type"] == "sandbox"


def caller() -> Caller:
    return g.caller
