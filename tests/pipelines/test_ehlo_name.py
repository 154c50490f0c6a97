"""The name the SMTP client greets with: never `localhost` nor an address, chosen from
configuration, and a warning at start when the operator gave no public name."""

import logging

import pytest

from pipelines.adapters import smtp_client as transport
from pipelines.core.settings import Settings


@pytest.mark.parametrize("name", ["localhost", "[127.0.0.1]", "192.0.2.7", "vm", "localhost.localdomain"])
def test_a_configured_ehlo_name_that_receivers_would_score_badly_is_refused_at_start(name):
    with pytest.raises(ValueError, match="POSTROOM_SMTP_HELO_NAME"):
        Settings.from_env({"POSTROOM_SMTP_HELO_NAME": name})


def test_a_public_configured_name_is_used_as_it_is():
    settings = Settings.from_env({"POSTROOM_SMTP_HELO_NAME": "out.acme.example", "POSTROOM_SMTP_URL": "smtp://x"})
    assert transport.announce_ehlo(settings) == "out.acme.example"


def test_falling_back_warns_once_and_names_the_setting(caplog, monkeypatch):
    monkeypatch.setattr(transport.socket, "getfqdn", lambda: "localhost")
    transport._announced_ehlo.cache_clear()
    settings = Settings(smtp_url="smtp://127.0.0.1:25", base_url="http://10.1.2.3:8080",
                        bounce_domain="bounces.acme.example")
    with caplog.at_level(logging.WARNING, logger="postroom.transport"):
        assert transport.announce_ehlo(settings) == "bounces.acme.example"
        assert transport.announce_ehlo(settings) == "bounces.acme.example"
    [record] = [r for r in caplog.records if r.name == "postroom.transport"]
    assert "POSTROOM_SMTP_HELO_NAME" in record.getMessage() and "bounce domain" in record.getMessage()
    transport._announced_ehlo.cache_clear()


def test_a_public_base_url_host_needs_no_warning(caplog):
    settings = Settings(smtp_url="smtp://127.0.0.1:25", base_url="https://mail.acme.example")
    with caplog.at_level(logging.WARNING, logger="postroom.transport"):
        assert transport.announce_ehlo(settings) == "mail.acme.example"
    assert not [r for r in caplog.records if r.name == "postroom.transport"]
    assert transport.announce_ehlo(Settings()) is None  # the capture outbox greets nobody
