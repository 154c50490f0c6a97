"""Settings for ops processes: the environment plus the embedded defaults resolved."""

from __future__ import annotations

import os
import secrets
import time

from pipelines.core.settings import Settings

from . import embedded_store

# How long a process that lost the race to create the secret key waits for the winner's write.
SECRET_WRITE_WAIT_SECONDS = 5.0


def secret_key_for(settings: Settings) -> str:
    """POSTROOM_SECRET_KEY, or one generated once and kept in DATA_DIR (so tokens in
    already-sent emails stay valid across restarts)."""
    if settings.secret_key:
        return settings.secret_key
    path = settings.data_dir / "secret_key"
    embedded_store.private_dir(settings.data_dir)
    try:
        # O_EXCL: of two processes starting at once exactly one creates the file (owner-only
        # from the first byte); the other finds it and reads the winner's key.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_secret(path)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(48))
    return _read_secret(path)


def _read_secret(path) -> str:
    """The key, waiting briefly while a concurrent creator is still writing it."""
    deadline = time.monotonic() + SECRET_WRITE_WAIT_SECONDS
    while not (key := path.read_text().strip()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} is empty; delete it or set POSTROOM_SECRET_KEY.")
        time.sleep(0.01)
    return key


# Bound to every address: links name loopback; only POSTROOM_BASE_URL can say which name recipients reach.
_WILDCARD_HOSTS = {"0.0.0.0", "::", ""}


def load(*, start_store: bool = True, listen: tuple[str, int] | None = None) -> Settings:
    """`listen`: the (host, port) this process serves HTTP on; without POSTROOM_BASE_URL,
    links (in mail, `hosted_url`) name that address, not the default's port 8080."""
    settings = Settings.from_env()
    changes = {"secret_key": secret_key_for(settings)}
    if not settings.mongodb_url and start_store:
        changes["mongodb_url"] = embedded_store.ensure_running(settings.data_dir)
    if listen is not None and not os.environ.get("POSTROOM_BASE_URL"):
        host, port = listen
        host = "127.0.0.1" if host in _WILDCARD_HOSTS else host
        changes["base_url"] = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    return settings.replace(**changes)


def child_env(settings: Settings) -> dict[str, str]:
    """Environment for a child process so it sees the same resolved settings."""
    env = dict(os.environ)
    env["POSTROOM_SECRET_KEY"] = settings.secret_key
    if settings.mongodb_url:
        env["POSTROOM_MONGODB_URL"] = settings.mongodb_url
    env["POSTROOM_DATA_DIR"] = str(settings.data_dir)
    return env
