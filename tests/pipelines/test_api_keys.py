"""API key material and permission rules."""

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.core.api_keys import (
    ALL_PERMISSIONS,
    AREAS,
    CONSOLE,
    generate_key,
    grants,
    hash_key,
    is_valid_permission,
    looks_like_key,
)


def test_live_and_sandbox_keys_carry_their_prefix_and_enough_randomness():
    live, sandbox = generate_key(False), generate_key(True)
    assert live.startswith("tm_live_") and sandbox.startswith("tm_test_")
    assert len(live) - len("tm_live_") >= 43  # 32 random bytes, URL-safe base64
    assert len({generate_key(False) for _ in range(200)}) == 200


def test_generated_keys_look_like_keys_and_other_strings_do_not():
    assert looks_like_key(generate_key(False)) and looks_like_key(generate_key(True))
    for other in ("", "tm_live_", "tm_live_short", "sk_live_" + "x" * 40, "TM_LIVE_" + "x" * 40,
                  "tm_live_" + "x" * 300):
        assert not looks_like_key(other), other


def test_keys_are_stored_as_their_sha256():
    key = generate_key(False)
    assert hash_key(key) == hashlib.sha256(key.encode()).hexdigest()
    assert hash_key(key) == hash_key(key)
    assert hash_key(key) != hash_key(generate_key(False))


def test_every_area_has_read_and_write_permissions():
    assert set(ALL_PERMISSIONS) == {f"{a}:{m}" for a in AREAS for m in ("read", "write")}
    assert {"email", "contacts", "campaigns", "webhooks", "templates"} <= set(AREAS)


@pytest.mark.parametrize("name", ["*", "email:read", "email:write", "email:*", "contacts:*", "console"])
def test_valid_permission_names(name):
    assert is_valid_permission(name)


@pytest.mark.parametrize("name", ["", "email", "email:", ":read", "email:send", "mail:read", "email:read:x",
                                  "Email:read", "**", "console:read", "console:*"])
def test_invalid_permission_names(name):
    assert not is_valid_permission(name)


def test_star_grants_everything_and_nothing_grants_nothing():
    for needed in ALL_PERMISSIONS:
        assert grants(["*"], needed)
        assert not grants([], needed)


@given(area=st.sampled_from(AREAS), other=st.sampled_from(AREAS), mode=st.sampled_from(["read", "write"]))
def test_an_area_wildcard_grants_both_modes_of_that_area_only(area, other, mode):
    assert grants([f"{area}:*"], f"{area}:{mode}")
    assert grants([f"{area}:*"], f"{other}:{mode}") == (area == other)


@given(held=st.sets(st.sampled_from(ALL_PERMISSIONS)), needed=st.sampled_from(ALL_PERMISSIONS))
def test_exact_permissions_grant_exactly_themselves(held, needed):
    assert grants(sorted(held), needed) == (needed in held)


def test_read_does_not_imply_write():
    assert grants(["email:read"], "email:read")
    assert not grants(["email:read"], "email:write")
    assert not grants(["email:write"], "email:read")



def test_console_is_granted_by_itself_or_by_star_only():
    assert grants(["console"], CONSOLE) and grants(["*"], CONSOLE)
    assert not grants(list(ALL_PERMISSIONS), CONSOLE)
    assert not any(grants(["console"], needed) for needed in ALL_PERMISSIONS)
