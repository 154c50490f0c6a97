"""A template sent with template_id arrives in the real SMTP receiver personalised for the
contact, with the request's template_data, the workspace's company fields and a working
unsubscribe link; broken or missing templates are refused at the API."""

import json

from mongo import contacts
from pipelines.messages import links
from tests.support.api import assert_error
from tests.support.polling import wait_status

TEMPLATE = """<html><body>
<h1>Hi {{firstName|there}} {{lastName||uppercase}}</h1>
<p>Your plan: {{attributes.plan}} at {{company}}.</p>
{{#if total >= 100}}<p>Free shipping!</p>{{else}}<p>Add more for free shipping.</p>{{/if}}
<ul>{{#each items}}<li>{{@index}}. {{this.name}}{{#if @last}} (last){{/if}}</li>{{/each}}</ul>
<p>{{note}}</p>
<p>Literal: {{7*7}} {% if true %}x{% endif %}</p>
</body></html>"""




def test_a_template_send_arrives_personalised_for_the_contact(service):
    tenant = service.tenant(settings={"company_name": "Acme Ltd", "company_address": "1 Main St, Springfield"})
    contact = contacts.new_document(tenant.workspace_id, email="Ann.Lee@example.net", first_name="Ann",
                                    last_name="Lee", attributes={"plan": "pro", "company": "Initech & Co"})
    assert service.store.run(contacts.insert, contact)
    made = tenant.post("/templates", json={"name": "Order", "html": TEMPLATE}).json()["data"]

    response = tenant.post("/email/send", json={
        "to": "ann.lee@example.net", "subject": "Order for {{firstName}}: {{note}}",
        "template_id": made["id"],
        "template_data": {"total": 120, "note": "<b>fragile</b>",
                          "items": [{"name": "Hat"}, {"name": "Scarf"}, {"name": "Mittens"}]}})
    assert response.status_code == 202, response.text
    message_id = response.json()["data"]["message_id"]

    [received] = service.smtp.wait_for("ann.lee@example.net", timeout=30)
    html = received.body("html")
    assert received.message["Subject"] == "Order for Ann: fragile"
    assert "<h1>Hi Ann LEE</h1>" in html
    assert "Your plan: pro at Initech &amp; Co." in html
    assert "<p>Free shipping!</p>" in html and "Add more" not in html
    assert "<li>0. Hat</li><li>1. Scarf</li><li>2. Mittens (last)</li>" in html
    assert "<p>&lt;b&gt;fragile&lt;/b&gt;</p>" in html
    assert "Literal: {{7*7}} {% if true %}x{% endif %}" in html
    # No {{unsubscribe_url}} in the template: the compliance footer is added before </body>.
    assert html.index("Unsubscribe</a>") < html.index("</body>")
    assert "Acme Ltd<br>1 Main St, Springfield<br>" in html
    token = html.split(f'href="{service.base_url}/u/', 1)[1].split('"', 1)[0]
    payload = links.verify("unsubscribe", token, service.env["POSTROOM_SECRET_KEY"])
    assert payload == {"w": tenant.workspace_id, "c": contact["_id"], "e": "ann.lee@example.net", "m": message_id}
    assert "Hi Ann LEE" in received.body("plain")


def test_a_template_that_outputs_its_own_unsubscribe_link_gets_no_footer_and_the_version_is_kept(service, tenant):
    made = tenant.post("/templates", json={
        "name": "Own footer",
        "html": '<p>v1 {{greeting|Hello}} {{current_year}}</p><a href="{{unsubscribe_url}}">stop</a>'}
    ).json()["data"]
    first = tenant.post("/email/send", json={"to": "noreply-test@example.net", "subject": "One",
                                             "template_id": made["id"]})
    assert first.status_code == 202, first.text
    [received] = service.smtp.wait_for("noreply-test@example.net", timeout=30)
    html = received.body("html")
    assert html.startswith("<p>v1 Hello 20") and "Manage preferences" not in html
    assert f'<a href="{service.base_url}/u/' in html
    stored = service.store.run(lambda db: db.messages.find_one({"_id": first.json()["data"]["message_id"]}))
    assert stored["template_version"] == 1


def test_sending_an_unknown_deleted_or_foreign_template_answers_template_not_found(service, tenant):
    made = tenant.post("/templates", json={"name": "Gone", "html": "<p>x</p>"}).json()["data"]
    other = service.tenant()
    foreign = other.post("/templates", json={"name": "Theirs", "html": "<p>y</p>"}).json()["data"]
    assert tenant.delete(f"/templates/{made['id']}").status_code == 200
    for template_id in (made["id"], foreign["id"], "no-such-template"):
        response = tenant.post("/email/send", json={"to": "x@example.net", "subject": "s", "template_id": template_id})
        assert_error(response, 404, "template_not_found")
    batch = tenant.post("/email/batch", json={"messages": [
        {"to": "a@example.net", "subject": "s", "text": "fine"},
        {"to": "b@example.net", "subject": "s", "template_id": made["id"]}]})
    assert batch.status_code == 404 and batch.json()["error"]["path"] == "messages[1].template_id"


def test_malformed_merge_tags_at_send_are_refused_with_their_position(tenant):
    response = tenant.post("/email/send", json={"to": "x@example.net", "subject": "Hi {{#each items}}",
                                                "html": "<p>ok</p>"})
    error = assert_error(response, 400, "validation_error", "subject")
    assert "line 1, column 4" in error["message"]
    response = tenant.post("/email/send", json={"to": "x@example.net", "subject": "s",
                                                "html": "<p>\n{{/if}}</p>"})
    assert response.json()["error"]["path"] == "html" and "line 2, column 1" in response.json()["error"]["message"]
    made = tenant.post("/templates", json={"name": "T", "html": "<p>x</p>"}).json()["data"]
    response = tenant.post("/email/send", json={"to": "x@example.net", "subject": "s", "html": "<p>y</p>",
                                                "template_id": made["id"]})
    assert response.status_code == 400 and response.json()["error"]["path"] == "html"


def test_a_batch_of_template_sends_is_personalised_per_message(service, tenant):
    made = tenant.post("/templates",
                       json={"name": "B", "html": "<p>Dear {{name}}</p>{{unsubscribe_url}}"}).json()["data"]
    response = tenant.post("/email/batch", json={"messages": [
        {"to": f"batch{i}@example.net", "subject": "For {{name}}", "template_id": made["id"],
         "template_data": {"name": f"Reader {i}"}} for i in range(3)]})
    assert response.status_code == 202, response.text
    for i in range(3):
        [received] = service.smtp.wait_for(f"batch{i}@example.net", timeout=30)
        assert received.message["Subject"] == f"For Reader {i}"
        assert f"<p>Dear Reader {i}</p>" in received.body("html")


def test_template_data_is_stored_as_its_json_text_and_arrives_as_sent(service, tenant):
    # stored as text (pipelines.templates.personalise.TEMPLATE_DATA_FIELD): nothing queries inside it
    data = {"ref": 2**60, "city": "Zürich", "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}]}
    response = tenant.post("/email/send", json={
        "to": "bigref@example.net", "subject": "Ref {{ref}}", "template_data": data,
        "html": "<p>{{city}}{{#each lines}} {{this.sku}}x{{this.qty}}{{/each}}</p>"})
    assert response.status_code == 202, response.text
    [received] = service.smtp.wait_for("bigref@example.net", timeout=30)
    assert received.message["Subject"] == f"Ref {2**60}"
    assert "<p>Zürich A-1x2 B-2x1</p>" in received.body("html")
    stored = service.store.run(lambda db: db.messages.find_one({"_id": response.json()["data"]["message_id"]}))
    assert json.loads(stored["template_data_json"]) == data and "template_data" not in stored


MAX_HTML = 262_144  # 256 KB, rule 8


def html_of_exactly(size: int) -> str:
    head = '<html><body><p>Sale: <a href="https://shop.example/sale">shop</a></p>'
    tail = "</body></html>"
    filler = "<p>" + "y" * 90 + "</p>"
    middle = filler * ((size - len(head) - len(tail)) // len(filler))
    html = head + middle + "z" * (size - len(head) - len(middle) - len(tail)) + tail
    assert len(html.encode()) == size
    return html


def test_html_of_exactly_256_kb_is_accepted_and_delivered_with_footer_and_tracking(service, tenant):
    html = html_of_exactly(MAX_HTML)
    template = tenant.post("/templates", json={"name": "Exactly 256 KB", "html": html})
    assert template.status_code == 201, template.text
    sends = [{"to": "exact-html@example.net", "html": html},
             {"to": "exact-template@example.net", "template_id": template.json()["data"]["id"]}]
    for send in sends:
        response = tenant.post("/email/send", json={"subject": "Big", "track_opens": True, "track_clicks": True,
                                                    **send})
        assert response.status_code == 202, response.text
        wait_status(tenant, response.json()["data"]["message_id"], "delivered")
        [received] = service.smtp.wait_for(send["to"], timeout=30)
        body = received.body("html")
        assert len(body.encode()) > MAX_HTML
        assert body.count("y" * 90) == html.count("y" * 90), "the client's part arrives whole"
        assert "/t/c/" in body and "/t/o/" in body and "/u/" in body  # tracking and footer on top
    over = tenant.post("/email/send", json={"to": "over@example.net", "subject": "s", "html": html + " "})
    assert over.status_code == 400 and over.json()["error"]["path"] == "html"


def test_a_message_whose_rendered_body_exceeds_256_kb_fails_clearly(service, tenant):
    # template_data itself stays under its own 256 KB bound; the body it fills goes past it
    made = tenant.post("/templates", json={"name": "Big", "html": "<p>{{blob}}{{blob}}</p>"}).json()["data"]
    response = tenant.post("/email/send", json={"to": "big@example.net", "subject": "s", "template_id": made["id"],
                                                "template_data": {"blob": "x" * (150 * 1024)}})
    assert response.status_code == 202, response.text
    status = wait_status(tenant, response.json()["data"]["message_id"], "failed")
    assert "larger than 256 KB" in status["history"][-1]["detail"]
