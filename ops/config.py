"""Settings for ops processes: the environment plus the embedded defaults resolved."""

from __future__ import annotations

import secrets

from pipelines.settings import Settings

from . import embedded_store


def secret_key_for(settings: Settings) -> str:
    """POSTROOM_SECRET_KEY, or one generated once and kept in DATA_DIR (so tokens in
    already-sent emails stay valid across restarts)."""
    if settings.secret_key:
        return settings.secret_key
    path = settings.data_dir / "secret_key"
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_text(secrets.token_urlsafe(48))
        path.chmod(0o600)
    return path.read_text().strip()


def load(*, start_store: bool = True) -> Settings:
    settings = Settings.from_env()
    changes = {"secret_key": secret_key_for(settings)}
    if not settings.mongodb_url and start_store:
        changes["mongodb_url"] = embedded_store.ensure_running(settings.data_dir)
    return settings.replace(**changes)


def child_env(settings: Settings) -> dict[str, str]:
    """Environment for a child process so it sees the same resolved settings."""
    import os
    env = dict(os.environ)
    env["POSTROOM_SECRET_KEY"] = settings.secret_key
    if settings.mongodb_url:
        env["POSTROOM_MONGODB_URL"] = settings.mongodb_url
    env["POSTROOM_DATA_DIR"] = str(settings.data_dir)
    return env
