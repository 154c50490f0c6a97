"""A contact import written in row groups (pipelines/workflows/bulk_import.py over
mongo/contact_import.py), on the real store: the summary adds up when an address repeats
across row groups, every created contact's events reach the outbox once, a re-run changes
nothing, and a pledge a dead importer left behind is finished by the sweep with the events
of the contacts that really went in."""

from __future__ import annotations

from mongo import contact_import, contacts, outbox
from pipelines.audience.contact_csv import read_rows
from pipelines.core.clock import ms_in
from pipelines.workflows import bulk_import

WORKSPACE = "ws-import"

# Row groups of 2 contact rows: ann repeats in the second and third groups, bob in his own.
CSV = ("email,first_name,plan\n"
       "ann@example.com,Ann,free\n"       # line 2, group 1
       "bob@example.com,Bob,free\n"       # line 3, group 1
       "not-an-address,Bad,free\n"        # line 4, an error (read with group 2)
       "BOB@example.com,Bobby,\n"         # line 5, group 2: bob again (merged, later cells win)
       "ann@example.com,Anne,pro\n"       # line 6, group 2: ann again, an earlier group's address
       "cat@example.com,Cat,free\n"       # line 7, group 3
       "ann@example.com,,team\n")         # line 8, group 3: ann a third time


def rows_of(text: str):
    return read_rows(text.splitlines(keepends=True))[1]


async def events(db, event: str) -> list[dict]:
    return await db.outbox.find({"workspace_id": WORKSPACE, "event": event}).to_list()


def adds_up(summary: dict) -> bool:
    return summary["rows"] == (summary["created"] + summary["updated"] + summary["unchanged"]
                               + summary["duplicates"] + summary["error_count"])


def test_the_summary_adds_up_when_an_address_repeats_across_row_groups(private_db):
    async def go(db):
        summary = await bulk_import.import_rows(db, WORKSPACE, rows_of(CSV), row_group_rows=2)
        stored = {c["email"]: c for c in await db.contacts.find({"workspace_id": WORKSPACE}).to_list()}
        return summary, stored
    summary, stored = private_db.run(go)
    assert (summary["rows"], summary["created"], summary["updated"], summary["unchanged"], summary["duplicates"],
            summary["error_count"]) == (7, 3, 0, 0, 3, 1), summary
    assert adds_up(summary)
    assert [(e["line"], e["message"].split(":")[0]) for e in summary["errors"]] == [(4, "email")]
    assert set(stored) == {"ann@example.com", "bob@example.com", "cat@example.com"}
    ann = stored["ann@example.com"]
    assert (ann["first_name"], ann["attributes"]) == ("Anne", {"plan": "team"})  # the later cells win
    assert stored["bob@example.com"]["first_name"] == "Bobby"


def test_every_created_contact_has_its_events_once_and_no_pledge_is_left(private_db):
    text = "email,first_name\n" + "".join(f"p{n}@example.com,P{n}\n" for n in range(25))

    async def go(db):
        summary = await bulk_import.import_rows(db, WORKSPACE, rows_of(text), row_group_rows=10)
        created = await events(db, "contact.created")
        stored = await db.contacts.find({"workspace_id": WORKSPACE}).to_list()
        return summary, created, stored, await db[outbox.PLEDGES].count_documents({})
    summary, created, stored, pledges = private_db.run(go)
    assert summary["created"] == 25 and adds_up(summary)
    assert sorted(e["data"]["contact"]["id"] for e in created) == sorted(c["_id"] for c in stored)
    assert all(c[outbox.PENDING] == [] and c[outbox.PENDING_AT] == 0 for c in stored)  # nothing to rewrite
    assert pledges == 0


def test_a_rerun_of_the_same_file_changes_nothing_and_records_nothing(private_db):
    # ann repeats in another row group with the same cells (repeats that disagree are
    # written again on a re-run, in file order, and end as the last one says)
    text = "email,first_name,plan\nann@example.com,Ann,free\nbob@example.com,Bob,free\n" \
           "ann@example.com,Ann,free\ncat@example.com,Cat,free\n"

    async def go(db):
        first = await bulk_import.import_rows(db, WORKSPACE, rows_of(text), row_group_rows=2)
        before = [await events(db, name) for name in ("contact.created", "contact.updated")]
        versions = {c["_id"]: c["version"] for c in await db.contacts.find({"workspace_id": WORKSPACE}).to_list()}
        second = await bulk_import.import_rows(db, WORKSPACE, rows_of(text), row_group_rows=2)
        after = [await events(db, name) for name in ("contact.created", "contact.updated")]
        versions_after = {c["_id"]: c["version"]
                          for c in await db.contacts.find({"workspace_id": WORKSPACE}).to_list()}
        return first, second, before, after, versions, versions_after
    first, second, before, after, versions, versions_after = private_db.run(go)
    assert first["created"] == 3
    assert (second["created"], second["updated"], second["unchanged"], second["duplicates"]) == (0, 0, 3, 1)
    assert adds_up(second)
    assert after == before and versions_after == versions


def test_a_pledge_left_by_a_dead_importer_records_only_the_events_of_contacts_that_went_in(private_db):
    async def go(db):
        await contact_import.ensure_unique_addresses(db)
        [row_in, row_never] = list(rows_of("email\nin@example.com\nnever@example.com\n"))
        group = contact_import.plan_row_group(WORKSPACE, [row_in, row_never])
        pledge_id = await outbox.pledge(db, "contacts", group.events_of)
        await db.contacts.insert_one(group.docs[0])  # ... and the importer died before the second
        fresh = await outbox.relay_stranded(db)     # a live importer's pledge is left to it
        await db[outbox.PLEDGES].update_one({"_id": pledge_id},
                                            {"$set": {outbox.PENDING_AT: ms_in(-outbox.STRANDED_AFTER_SECONDS - 5)}})
        swept, again = await outbox.relay_stranded(db), await outbox.relay_stranded(db)
        created = await events(db, "contact.created")
        return group, fresh, swept, again, created, await db[outbox.PLEDGES].count_documents({})
    group, fresh, swept, again, created, pledges = private_db.run(go)
    assert (fresh, swept, again, pledges) == (0, 1, 0, 0)
    assert [e["data"]["contact"]["id"] for e in created] == [group.docs[0]["_id"]]


def test_a_contact_created_meanwhile_by_someone_else_is_updated_not_duplicated(private_db):
    async def go(db):
        await contact_import.ensure_unique_addresses(db)
        await contacts.insert(db, contacts.new_document(WORKSPACE, email="ann@example.com", first_name="Ann"))
        summary = await bulk_import.import_rows(db, WORKSPACE, rows_of("email,first_name\nann@example.com,Anne\n"
                                                                        "dan@example.com,Dan\n"))
        stored = await db.contacts.find({"workspace_id": WORKSPACE}).to_list()
        updated = await events(db, "contact.updated")
        return summary, stored, updated
    summary, stored, updated = private_db.run(go)
    assert (summary["created"], summary["updated"]) == (1, 1) and adds_up(summary)
    assert sorted((c["email"], c["first_name"], c["version"]) for c in stored) == \
        [("ann@example.com", "Anne", 1), ("dan@example.com", "Dan", 0)]
    assert [(e["data"]["contact"]["email"], e["data"]["changed"]) for e in updated] == \
        [("ann@example.com", ["first_name"])]
