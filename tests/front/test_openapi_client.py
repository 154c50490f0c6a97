"""A client generated from the served /openapi.yaml with openapi-python-client works
against the live service and hands back typed results (models, booleans, datetimes),
not bare dicts."""

import datetime as dt
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.e2e  # a generated client in a process of its own, against the real front

PACKAGE = "postroom_client"


# What a user of openapi-python-client sets, as the README's contract notes say: the CSV
# import's body read as bytes, and the self-referring JsonValue (which the generator
# cannot follow: it resolves references to models and enums only) read as any JSON value.
GENERATOR_CONFIG = "content_type_overrides:\n  text/csv: application/octet-stream\n"


def for_codegen(document: dict) -> dict:
    """The served document with JsonValue as any JSON value (`{}`), everything else as served."""
    document["components"]["schemas"]["JsonValue"] = {}
    return document


@pytest.fixture
def generated(service, tmp_path):
    spec = tmp_path / "openapi.json"
    served = httpx.get(service.base_url + "/openapi.json", timeout=30)
    assert served.status_code == 200 and "JsonValue" in served.json()["components"]["schemas"]
    spec.write_text(json.dumps(for_codegen(served.json())))
    config = tmp_path / "generator.yaml"
    config.write_text(GENERATOR_CONFIG)
    bin_dir = Path(sys.executable).parent  # the generator's formatter (ruff) lives beside it
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "openapi_python_client", "generate", "--path", str(spec),
                           "--config", str(config), "--meta", "none", "--output-path", str(tmp_path / PACKAGE)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # Every operation is generated. The one thing the generator leaves out is the narrowed
    # model of each step type's alternative (StepIn's oneOf, whose config fields take any
    # JSON value): the operations still take and return steps, as the StepIn model.
    assert "Endpoint will not be generated" not in output, output
    skipped = re.findall(r"Unable to process schema /components/schemas/(\S+):", output)
    assert all(re.fullmatch(r"StepIn_type_\d+", name) for name in skipped), output
    sys.path.insert(0, str(tmp_path))
    try:
        yield lambda name: importlib.import_module(f"{PACKAGE}.{name}")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_a_generated_client_creates_reads_and_lists_contacts_with_typed_results(service, tenant, generated):
    # one module per tag (front/openapi_summaries.py), not every operation in api.default
    client = generated("client").AuthenticatedClient(base_url=service.base_url, token=tenant.key)
    models = generated("models")
    create = generated("api.contacts.post_contacts_create_contact")
    body = models.PostContactsCreateContactCreateContact.from_dict(
        {"email": "Generated@Example.org", "first_name": "Ada", "attributes": {"plan": "pro"}})
    created = create.sync_detailed(client=client, body=body)
    assert created.status_code == 201
    contact = created.parsed.data
    assert isinstance(contact, models.ContactWithLists)
    assert contact.email == "Generated@example.org" and contact.first_name == "Ada"
    assert contact.subscribed is True and contact.bounced is False and contact.lists == []
    assert isinstance(contact.created_at, dt.datetime) and contact.unsubscribed_at is None
    assert contact.attributes.to_dict() == {"plan": "pro"}

    got = generated("api.contacts.get_contacts_get_contact").sync(contact_id=contact.id, client=client)
    assert isinstance(got.data, models.ContactWithLists) and got.data.id == contact.id
    assert got.data.updated_at == contact.updated_at

    listed = generated("api.contacts.get_contacts_list_contacts").sync(client=client, search="generated")
    assert [c.id for c in listed.data] == [contact.id]
    assert all(isinstance(c, models.Contact) for c in listed.data)
    assert listed.pagination.total == 1 and listed.pagination.has_more is False

    missing = generated("api.contacts.get_contacts_get_contact").sync(contact_id="no-such-contact", client=client)
    assert isinstance(missing, models.Error) and missing.error.code == "not_found"


def test_a_generated_client_reads_a_send_answer_by_its_status(service, tenant, generated):
    client = generated("client").AuthenticatedClient(base_url=service.base_url, token=tenant.key)
    models = generated("models")
    send = generated("api.email.post_email_send")
    # The body is one of three alternatives by its content (html, text, template_id: the
    # document's oneOf); this one is the text email's, the other fields ride along with it
    body = models.PostEmailSendBodyType1.from_dict({"to": "typed@example.org", "subject": "Hi", "text": "x"})
    queued = send.sync_detailed(client=client, body=body)
    assert queued.status_code == 202 and isinstance(queued.parsed.data, models.EmailAccepted)
    assert queued.parsed.data.to == ["typed@example.org"] and queued.parsed.data.status == "queued"
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    scheduled = send.sync_detailed(client=client, body=models.PostEmailSendBodyType1.from_dict(
        {"to": "typed@example.org", "subject": "Later", "text": "x", "send_at": later}))
    assert scheduled.status_code == 201 and isinstance(scheduled.parsed.data, models.EmailScheduled)
    assert isinstance(scheduled.parsed.data.scheduled_at, dt.datetime)
