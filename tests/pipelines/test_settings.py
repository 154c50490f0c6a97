"""Settings come from POSTROOM_* variables only, typed by each field's default."""

import dataclasses
from pathlib import Path

import pytest

from pipelines.core.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_nothing_set_gives_the_embedded_defaults():
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.mongodb_url is None and settings.amqp_url is None and settings.smtp_url is None
    assert settings.data_dir == Path("var")
    assert settings.rate_limit_per_minute == 100
    assert settings.email_rate_limit_per_minute == 100
    assert settings.idempotency_ttl_seconds == 3600
    assert settings.max_html_bytes == 256 * 1024
    assert settings.allow_private_targets is False


def test_values_are_parsed_to_the_type_of_their_field():
    settings = Settings.from_env({
        "POSTROOM_MONGODB_URL": "mongodb://db:27017",
        "POSTROOM_RATE_LIMIT_PER_MINUTE": "5",
        "POSTROOM_SCHEDULER_INTERVAL_SECONDS": "0.25",
        "POSTROOM_DATA_DIR": "/srv/postroom",
        "POSTROOM_ALLOW_PRIVATE_TARGETS": "1",
    })
    assert settings.mongodb_url == "mongodb://db:27017"
    assert settings.rate_limit_per_minute == 5
    assert settings.scheduler_interval_seconds == 0.25
    assert settings.data_dir == Path("/srv/postroom")
    assert settings.allow_private_targets is True


@pytest.mark.parametrize("raw, expected", [
    ("1", True), ("true", True), ("TRUE", True), ("yes", True), ("on", True), (" on ", True),
    ("0", False), ("false", False), ("no", False), ("off", False), ("maybe", False),
])
def test_flags_accept_the_usual_spellings(raw, expected):
    assert Settings.from_env({"POSTROOM_ALLOW_PRIVATE_TARGETS": raw}).allow_private_targets is expected


def test_an_empty_value_means_unset():
    settings = Settings.from_env({"POSTROOM_AMQP_URL": "", "POSTROOM_RATE_LIMIT_PER_MINUTE": ""})
    assert settings.amqp_url is None
    assert settings.rate_limit_per_minute == 100


def test_other_variables_are_ignored():
    assert Settings.from_env({"RATE_LIMIT_PER_MINUTE": "1", "POSTROOM_NO_SUCH_SETTING": "x"}) == Settings()


def test_a_malformed_number_is_refused_at_start():
    with pytest.raises(ValueError):
        Settings.from_env({"POSTROOM_RATE_LIMIT_PER_MINUTE": "a hundred"})


def test_a_send_lease_that_cannot_outlast_one_smtp_transaction_is_refused_at_start():
    with pytest.raises(ValueError, match="POSTROOM_SEND_LEASE_SECONDS"):
        Settings.from_env({"POSTROOM_SEND_LEASE_SECONDS": "30"})  # the SMTP timeout is 30 s
    with pytest.raises(ValueError, match="POSTROOM_SEND_LEASE_SECONDS"):
        Settings.from_env({"POSTROOM_SEND_LEASE_SECONDS": "5", "POSTROOM_SMTP_TIMEOUT_SECONDS": "3"})
    assert Settings.from_env({"POSTROOM_SEND_LEASE_SECONDS": "8",
                              "POSTROOM_SMTP_TIMEOUT_SECONDS": "2"}).send_lease_seconds == 8


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Settings)])
def test_every_setting_reads_back_with_its_declared_type(field):
    declared = next(f for f in dataclasses.fields(Settings) if f.name == field).type
    sample = {"bool": "1", "int": "700", "float": "7.5", "Path": "/tmp/x"}
    kind = next((k for k in ("bool", "float", "int", "Path") if k in str(declared)), "str")
    # a field whose value is checked at start gets one it accepts
    text = {"smtp_helo_name": "out.acme.example"}.get(field, "text")
    value = getattr(Settings.from_env({f"POSTROOM_{field.upper()}": sample.get(kind, text)}), field)
    expected = {"bool": bool, "int": int, "float": float, "Path": Path, "str": str}[kind]
    # exact type (a bool is an int to isinstance); any concrete Path flavour is a Path
    assert isinstance(value, expected) and (kind == "Path" or type(value) is expected), (field, declared, value)


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Settings)])
def test_every_setting_has_a_row_in_the_readme_configuration_table(field):
    assert f"| `POSTROOM_{field.upper()}` |" in README.read_text()


def test_replace_returns_a_changed_copy():
    settings = Settings.from_env({"POSTROOM_BASE_URL": "https://mail.example.com/"})
    changed = settings.replace(rate_limit_per_minute=1)
    assert settings.rate_limit_per_minute == 100 and changed.rate_limit_per_minute == 1
