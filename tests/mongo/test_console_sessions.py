"""Console sessions in the store: found by their cookie's hash while they last, refused
and purged once they have ended; operators found by name, whatever its case."""

from __future__ import annotations

import pytest

from mongo import console_sessions, operators
from pipelines.core import passwords
from pipelines.core.clock import now_ms
from pipelines.workflows.console_sessions import session_id, sign_in_operator, sign_out
from tests.support.harness import StoreThread


@pytest.fixture(scope="module")
def store(store_url, database_name):
    thread = StoreThread(store_url, f"{database_name}_console")
    yield thread
    thread.close()


def test_an_ended_session_is_refused_and_purged_and_a_live_one_kept(store):
    live = store.run(console_sessions.insert, session_id("live"), csrf="t", expires_ms=now_ms() + 60_000,
                     operator_id="ops")
    store.run(console_sessions.insert, session_id("ended"), csrf="t", expires_ms=now_ms() - 1, operator_id="ops")
    assert store.run(console_sessions.live, session_id("live")) == live
    assert store.run(console_sessions.live, session_id("ended")) is None
    assert store.run(console_sessions.purge_expired) >= 1
    assert store.run(lambda db: db.console_sessions.find_one({"_id": session_id("ended")})) is None
    assert store.run(sign_out, "live") and store.run(console_sessions.live, session_id("live")) is None


def test_an_operator_signs_in_by_name_in_any_case_with_the_right_password_only(store):
    store.run(operators.create, "Night Shift", passwords.hash_password("correct horse battery"))
    opened = store.run(sign_in_operator, "NIGHT SHIFT", "correct horse battery")
    assert opened.session["operator_id"] == "night shift" and opened.cookie not in str(opened.session)
    assert passwords.verify("correct horse battery", store.run(operators.get, "night shift")["password_hash"])
    assert not passwords.verify("correct horse batterY", store.run(operators.get, "night shift")["password_hash"])
    assert store.run(operators.create, "night shift", "x") is None  # the name is taken
