"""Hostile and broken templates on the real stack: refused at the API when the request
shows they cannot render, failed fast one by one when only the contact data shows it,
and never holding up another workspace's mail or their own batch mates."""

from mongo import contacts, templates
from tests.support.api import assert_error
from tests.support.polling import wait_status, wait_until

FILLER = "<p>" + "Hello from the stress test. " * 105 + "</p>"     # makes the body ~3 KB
THREE_NESTED = ("<table>{{#each items}}<tr>{{#each items}}<td>{{#each items}}{{this}} {{/each}}</td>"
                "{{/each}}</tr>{{/each}}</table>")


def test_a_3_kb_send_with_three_nested_loops_over_600_items_is_refused_at_the_api(tenant):
    html = FILLER + THREE_NESTED
    assert 3000 < len(html.encode()) < 4096
    data = {"items": list(range(600))}
    error = assert_error(tenant.post("/email/send", json={"to": "heavy@example.net", "subject": "s", "html": html,
                                                          "template_data": data}),
                         400, "validation_error", "template_data.items")
    assert "more than 100,000 steps" in error["message"]
    made = tenant.post("/templates", json={"name": "Heavy", "html": html}).json()["data"]
    batch = tenant.post("/email/batch", json={"messages": [
        {"to": "ok@example.net", "subject": "s", "text": "fine"},
        {"to": "heavy@example.net", "subject": "s", "template_id": made["id"], "template_data": data}]})
    assert_error(batch, 400, "validation_error", "messages[1].template_data.items")
    small = tenant.post("/email/send", json={"to": "light@example.net", "subject": "s", "template_id": made["id"],
                                             "template_data": {"items": list(range(5))}})
    assert small.status_code == 202, small.text


def test_a_heavy_render_from_contact_data_fails_fast_without_holding_up_another_workspaces_mail(service):
    heavy, other = service.tenant(), service.tenant()
    for i in range(100):   # the lists come from the contacts: the API cannot know their size
        doc = contacts.new_document(heavy.workspace_id, email=f"heavy{i}@heavy.example",
                                    attributes={"items": list(range(600))})
        assert service.store.run(contacts.insert, doc)
    html = FILLER + THREE_NESTED.replace("items", "attributes.items")
    accepted = heavy.post("/email/batch", json={"messages": [
        {"to": f"heavy{i}@heavy.example", "subject": "Report", "html": html} for i in range(100)]})
    assert accepted.status_code == 202, accepted.text
    heavy_ids = accepted.json()["data"]["message_ids"]

    light = other.post("/email/send", json={"to": "light@other.example", "subject": "Hi", "text": "quick"})
    assert light.status_code == 202, light.text
    service.smtp.wait_for("light@other.example", timeout=30)

    # The light email was delivered while the heavy job was still rendering: its 100
    # messages (held by the job, which delivers what it renders: still queued under the
    # born claim they were stored with, or sending under the job's claim) are only marked
    # failed once the job is through them all.
    def held():
        return [(m["status"], bool(m.get("lease_token"))) for m in service.store.run(
            lambda db: db.messages.find({"_id": {"$in": heavy_ids}}, {"status": 1, "lease_token": 1}).to_list())]

    def statuses():
        return [status for status, _ in held()]
    assert [h for h in held() if h not in (("queued", True), ("sending", True))] == []
    assert len(held()) == 100
    wait_until(lambda: statuses().count("failed") == 100, timeout=120, what="the heavy messages failed")
    detail = wait_status(heavy, heavy_ids[0], "failed")["history"][-1]["detail"]
    assert "loops need more than 100,000 steps for this message" in detail
    assert not service.smtp.messages_to("heavy0@heavy.example")


def test_a_poisoned_message_fails_at_once_and_its_batch_mates_are_delivered(service, tenant):
    made = tenant.post("/templates", json={"name": "Old", "html": "<p>placeholder</p>"}).json()["data"]
    poisoned = "{{#if vip}}" * 1000 + "<p>deep</p>" + "{{/if}}" * 1000   # saved before nesting was limited

    async def store_poisoned(db):
        await db.templates.update_one({"_id": made["id"]}, {"$set": {"html": poisoned}})
        await db.template_versions.update_one({"_id": templates.version_id(made["id"], 1)},
                                              {"$set": {"html": poisoned}})
    service.store.call(store_poisoned(service.store.db))
    deep_loops = "{{#each a}}" * 21 + "<p>{{leaf}} at {{@index}}</p>" + "{{/each}}" * 21   # a SyntaxError before
    twenty_one_levels = ["x"]
    for _ in range(20):
        twenty_one_levels = [{"a": twenty_one_levels}]

    response = tenant.post("/email/batch", json={"messages": [
        {"to": "first@example.net", "subject": "One", "text": "plain"},
        {"to": "poisoned@example.net", "subject": "Two", "template_id": made["id"], "template_data": {"vip": True}},
        {"to": "deep@example.net", "subject": "Three", "html": deep_loops,
         "template_data": {"a": twenty_one_levels, "leaf": "leaf"}}]})
    assert response.status_code == 202, response.text
    ids = response.json()["data"]["message_ids"]

    service.smtp.wait_for("first@example.net", timeout=30)
    [deep] = service.smtp.wait_for("deep@example.net", timeout=30)
    assert "<p>leaf at 0</p>" in deep.body("html")
    failed = wait_status(tenant, ids[1], "failed")
    assert "nest more than 400 levels deep" in failed["history"][-1]["detail"]
    assert not service.smtp.messages_to("poisoned@example.net")
