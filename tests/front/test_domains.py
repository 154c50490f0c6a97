"""Sending domains over real HTTP, verified against a real DNS server on loopback, and
mail from them arriving DKIM-signed so that dkimpy verifies it against the published key."""

import json
import re
import socket
import uuid

import dkim as dkimpy
import httpx
import pytest

from pipelines.domains.dns_records import is_public_host_name
from tests.support import inbound, reports
from tests.support.api import assert_error
from tests.support.dkim_dns import dnsfunc_for, publish_service_zone
from tests.support.polling import wait_status, wait_until
from tests.support.services import run_postroom


def new_domain():
    return f"mail-{uuid.uuid4().hex[:8]}.example.com"


def add(tenant, domain):
    response = tenant.post("/domains", json={"domain": domain})
    assert response.status_code == 201, response.text
    return response.json()["data"]


def records(domain_view):
    return {r["purpose"]: r for r in domain_view["dns_records"]}


def test_adding_a_domain_returns_the_records_to_publish(tenant):
    domain = new_domain()
    view = add(tenant, domain.upper() + ".")
    assert view["domain"] == domain and view["verified"] is False and view["verified_at"] is None
    recs = records(view)
    assert recs["verification"]["type"] == "TXT" and recs["verification"]["name"] == f"_postroom.{domain}"
    assert recs["verification"]["value"].startswith("postroom-verification=")
    assert recs["dkim"]["type"] == "CNAME" and recs["dkim"]["name"] == f"pr1._domainkey.{domain}"
    assert recs["dkim"]["value"].endswith(".dkim.postroom.test")
    assert recs["dkim"]["txt_value"].startswith("v=DKIM1; k=rsa; p=")
    assert {k: recs["return_path"][k] for k in ("type", "name", "value")} == {
        "type": "CNAME", "name": f"pr-bounces.{domain}", "value": "bounces.postroom.test"}
    assert all(r["verified"] is False and r["status"] == "pending" for r in recs.values())
    assert view["dkim"] == {"selector": "pr1", "algorithm": "rsa-sha256", "key_bits": 2048}
    assert "dkim_private_key" not in str(view)
    assert tenant.get(f"/domains/{view['id']}").json()["data"] == view
    listed = tenant.get("/domains").json()
    assert [d["id"] for d in listed["data"]] == [view["id"]] and listed["pagination"]["total"] == 1


def test_the_private_key_is_stored_sealed(service, tenant):
    view = add(tenant, new_domain())
    doc = service.store.run(lambda db: db.domains.find_one({"_id": view["id"]}))
    assert "PRIVATE KEY" not in doc["dkim_private_key"] and doc["dkim_private_key"].startswith("gAAAA")


def test_a_domain_twice_is_a_duplicate_and_bad_names_are_refused(tenant):
    domain = new_domain()
    add(tenant, domain)
    assert_error(tenant.post("/domains", json={"domain": domain}), 409, "duplicate", "domain")
    for bad in ("not a domain", "localhost", "-x.example.com", "a..b.com", "x" * 64 + ".com", ""):
        assert_error(tenant.post("/domains", json={"domain": bad}), 400, "validation_error", "domain")
    assert_error(tenant.post("/domains", json={"domain": "x" * 250 + ".com"}), 400, "validation_error", "domain")
    assert_error(tenant.post("/domains", json={}), 400, "validation_error", "domain")
    assert_error(tenant.post("/domains", json={"domain": 7}), 400, "validation_error", "domain")
    assert_error(tenant.post("/domains", json={"domain": "ok.example.com", "x": 1}), 400, "validation_error", "x")
    assert_error(tenant.post("/domains", json={"domain": "news.postroom.test"}), 400, "validation_error", "domain")


def test_unknown_and_foreign_domains_answer_404(service, tenant):
    view = add(tenant, new_domain())
    other = service.tenant()
    for call in (other.get, other.delete):
        assert_error(call(f"/domains/{view['id']}"), 404, "not_found")
    assert_error(other.post(f"/domains/{view['id']}/verify"), 404, "not_found")
    assert_error(tenant.get(f"/domains/{uuid.uuid4()}"), 404, "not_found")
    assert other.get("/domains").json()["data"] == []


def test_delete_removes_the_domain(tenant):
    view = add(tenant, new_domain())
    assert tenant.delete(f"/domains/{view['id']}").json()["data"] == {"id": view["id"], "deleted": True}
    assert_error(tenant.get(f"/domains/{view['id']}"), 404, "not_found")
    assert_error(tenant.delete(f"/domains/{view['id']}"), 404, "not_found")


def test_verify_reports_each_missing_or_wrong_record(tenant, dns_server):
    view = add(tenant, new_domain())
    recs = records(view)
    result = tenant.post(f"/domains/{view['id']}/verify")
    assert result.status_code == 200
    body = result.json()["data"]
    assert body["verified"] is False and sorted(body["failed_records"]) == ["dkim", "return_path", "verification"]
    assert {r["purpose"]: r["status"] for r in body["dns_records"]} == {
        "verification": "missing", "dkim": "missing", "return_path": "missing"}
    dns_server.set(recs["verification"]["name"], "TXT", "postroom-verification=wrong")
    dns_server.set(recs["dkim"]["name"], "CNAME", "pr1.someone-else.example.net")
    dns_server.set(recs["return_path"]["name"], "CNAME", "bounces.someone-else.example.net")
    body = tenant.post(f"/domains/{view['id']}/verify").json()["data"]
    assert {r["purpose"]: r["status"] for r in body["dns_records"]} == {
        "verification": "mismatch", "dkim": "mismatch", "return_path": "mismatch"}
    dns_server.publish(recs["dkim"])
    body = tenant.post(f"/domains/{view['id']}/verify").json()["data"]
    assert body["verified"] is False and sorted(body["failed_records"]) == ["dkim", "return_path", "verification"]
    # the customer's CNAME is right, but nothing answers at its target yet: a receiver could
    # not find the key, so it does not count as verified
    assert {r["purpose"]: r["status"] for r in body["dns_records"]} == {
        "verification": "mismatch", "dkim": "key_not_published", "return_path": "mismatch"}


@pytest.mark.e2e
def test_the_operator_export_publishes_every_domain_key_where_its_cname_points(service, tenant, dns_server):
    view = add(tenant, new_domain())
    recs = records(view)
    dns_server.publish(recs["verification"])
    dns_server.publish(recs["dkim"])
    assert tenant.post(f"/domains/{view['id']}/verify").json()["data"]["failed_records"] == ["dkim", "return_path"]
    published = publish_service_zone(service, dns_server)
    assert {"type": "TXT", "name": recs["dkim"]["value"], "value": recs["dkim"]["txt_value"]} in published
    assert published[0]["name"] == "pr1._domainkey.postroom.test"  # the shared domain's own key
    body = tenant.post(f"/domains/{view['id']}/verify").json()["data"]
    assert body["verified"] is True and body["failed_records"] == ["return_path"]  # optional
    zone = run_postroom(service.env, "dkim").stdout
    [line] = [z for z in zone.splitlines() if z.startswith(recs["dkim"]["value"] + ". IN TXT ")]
    strings = re.findall(r'"([^"]*)"', line)  # as a zone loader reads it: ≤ 255 characters each, joined
    assert len(strings) > 1 and all(len(t) <= 255 for t in strings) and "".join(strings) == recs["dkim"]["txt_value"]


def test_verify_succeeds_with_the_txt_key_instead_of_the_cname(tenant, dns_server):
    view = add(tenant, new_domain())
    recs = records(view)
    dns_server.publish(recs["verification"])
    dns_server.set(recs["dkim"]["name"], "TXT", recs["dkim"]["txt_value"])
    body = tenant.post(f"/domains/{view['id']}/verify").json()["data"]
    assert body["verified"] is True and body["failed_records"] == ["return_path"] and body["verified_at"]
    assert tenant.get(f"/domains/{view['id']}").json()["data"]["verified"] is True


def test_mail_from_an_unverified_domain_is_refused(tenant):
    domain = new_domain()
    add(tenant, domain)
    assert_error(tenant.post("/email/send", json={"to": "r@example.org", "subject": "s", "text": "t",
                                           "from_email": f"news@{domain}"}), 403, "domain_invalid")


@pytest.mark.e2e
def test_mail_from_a_verified_domain_is_signed_with_its_key(service, tenant, dns_server):
    domain = new_domain()
    view = add(tenant, domain)
    recs = records(view)
    dns_server.publish(recs["verification"])
    dns_server.publish(recs["dkim"])  # the CNAME to where the service publishes the key
    publish_service_zone(service, dns_server)
    assert tenant.post(f"/domains/{view['id']}/verify").json()["data"]["verified"] is True

    rcpt = f"signed-{uuid.uuid4().hex[:6]}@example.org"
    response = tenant.post("/email/send", json={"to": rcpt, "subject": "Signed", "html": "<p>Hi</p>",
                                                "from_email": f"news@{domain}", "from_name": "News"})
    assert response.status_code == 202, response.text
    [received] = service.smtp.wait_for(rcpt)
    assert received.message["From"] == f"News <news@{domain}>"
    signature = received.message["DKIM-Signature"]
    assert f"d={domain};" in signature.replace(" ", "").replace("\t", "") and "s=pr1" in signature
    assert dkimpy.verify(received.data, dnsfunc=dnsfunc_for(dns_server))


@pytest.mark.e2e
def test_mail_from_the_shared_domain_is_signed_with_the_service_key(service, tenant, dns_server):
    rcpt = f"shared-{uuid.uuid4().hex[:6]}@example.org"
    assert tenant.post("/email/send", json={"to": rcpt, "subject": "Hi", "text": "t"}).status_code == 202
    [received] = service.smtp.wait_for(rcpt)
    assert "d=postroom.test;" in received.message["DKIM-Signature"].replace(" ", "")
    publish_service_zone(service, dns_server)
    assert dkimpy.verify(received.data, dnsfunc=dnsfunc_for(dns_server))


@pytest.mark.e2e
def test_a_domain_with_its_return_path_record_gets_its_bounces_there(service, tenant, dns_server):
    """SPF alignment: MAIL FROM on `pr-bounces.<domain>` (a CNAME to the bounce domain);
    a DSN sent to that VERP address through the real inbound port is recorded."""
    domain = new_domain()
    view = add(tenant, domain)
    recs = records(view)
    for purpose in ("verification", "dkim", "return_path"):
        dns_server.publish(recs[purpose])
    publish_service_zone(service, dns_server)
    body = tenant.post(f"/domains/{view['id']}/verify").json()["data"]
    assert body["verified"] is True and body["failed_records"] == []
    assert records(body)["return_path"]["status"] == "verified"

    rcpt = f"rp-{uuid.uuid4().hex[:6]}@example.org"
    response = tenant.post("/email/send", json={"to": rcpt, "subject": "Aligned", "text": "Hi",
                                                "from_email": f"news@{domain}"})
    message_id = response.json()["data"]["message_id"]
    [received] = service.smtp.wait_for(rcpt)
    assert received.mail_from == f"bounce+{message_id}@pr-bounces.{domain}"
    assert dkimpy.verify(received.data, dnsfunc=dnsfunc_for(dns_server))
    wait_status(tenant, message_id, "delivered")

    raw = reports.load("rfc3464_permanent", recipient=rcpt, message_id=message_id, bounce_domain=f"pr-bounces.{domain}")
    assert inbound.submit(service, raw, f"bounce+{message_id}@pr-bounces.{domain}")  # stored: 250
    [bounce] = wait_until(lambda: tenant.get("/bounces", params={"email": rcpt}).json()["data"], what="bounce")
    assert bounce["message_id"] == message_id and bounce["type"] == "permanent"
    # a host nobody registered is refused at RCPT, as any other unknown address
    unregistered = f"bounce+{message_id}@pr-bounces.unknown-{uuid.uuid4().hex[:6]}.example"
    assert inbound.rcpt_answer(service, unregistered)[0] == 550


@pytest.mark.e2e
def test_without_its_return_path_record_a_domain_bounces_to_the_shared_bounce_domain(service, tenant, dns_server):
    domain = new_domain()
    view = add(tenant, domain)
    recs = records(view)
    dns_server.publish(recs["verification"])
    dns_server.publish(recs["dkim"])
    publish_service_zone(service, dns_server)
    assert tenant.post(f"/domains/{view['id']}/verify").json()["data"]["verified"] is True
    rcpt = f"norp-{uuid.uuid4().hex[:6]}@example.org"
    message_id = tenant.post("/email/send", json={"to": rcpt, "subject": "Hi", "text": "Hi",
                                                  "from_email": f"news@{domain}"}).json()["data"]["message_id"]
    [received] = service.smtp.wait_for(rcpt)
    assert received.mail_from == f"bounce+{message_id}@bounces.postroom.test"


def test_adding_a_domain_recommends_a_dmarc_record(tenant):
    domain = new_domain()
    view = add(tenant, domain)
    assert view["dmarc"] == {"type": "TXT", "name": f"_dmarc.{domain}", "value": "v=DMARC1; p=none",
                             "status": "pending", "found": None, "found_at": None, "checked_at": None}
    assert tenant.get(f"/domains/{view['id']}").json()["data"]["dmarc"] == view["dmarc"]


def test_verify_warns_without_dmarc_yet_verifies_and_finds_it_once_published(tenant, dns_server):
    domain = new_domain()
    view = add(tenant, domain)
    recs = records(view)
    dns_server.publish(recs["verification"])
    dns_server.set(recs["dkim"]["name"], "TXT", recs["dkim"]["txt_value"])
    body = tenant.post(f"/domains/{view['id']}/verify").json()["data"]
    assert body["verified"] is True and body["failed_records"] == ["return_path"]
    assert body["dmarc"]["status"] == "missing" and body["dmarc"]["checked_at"]
    [warning] = body["warnings"]
    assert warning["purpose"] == "dmarc" and warning["status"] == "missing"
    assert f'_dmarc.{domain} "v=DMARC1; p=none"' in warning["message"]

    dns_server.publish(view["dmarc"])  # what the tenant publishes: the record we recommended
    body = tenant.post(f"/domains/{view['id']}/verify").json()["data"]
    assert body["warnings"] == [] and body["verified"] is True
    assert body["dmarc"]["status"] == "verified" and body["dmarc"]["found"] == "v=DMARC1; p=none"
    assert body["dmarc"]["found_at"] == f"_dmarc.{domain}"
    assert tenant.get(f"/domains/{view['id']}").json()["data"]["dmarc"] == body["dmarc"]


def test_an_organisations_dmarc_policy_covers_its_sending_subdomain(tenant, dns_server):
    """Receivers look for the policy at the parent's _dmarc when the subdomain has none,
    and ignore TXT records there that are not DMARC."""
    organisation = f"org-{uuid.uuid4().hex[:8]}.example.com"
    view = add(tenant, f"news.{organisation}")
    dns_server.set(f"_dmarc.news.{organisation}", "TXT", "google-site-verification=abc")
    dns_server.set(f"_dmarc.{organisation}", "TXT", "v=DMARC1; p=reject; rua=mailto:dmarc@" + organisation)
    body = tenant.post(f"/domains/{view['id']}/verify").json()["data"]
    assert body["warnings"] == [] and body["dmarc"]["status"] == "verified"
    assert body["dmarc"]["found_at"] == f"_dmarc.{organisation}"
    assert body["dmarc"]["found"].startswith("v=DMARC1; p=reject")


@pytest.mark.e2e
def test_the_openapi_document_types_the_dmarc_record_and_the_warnings(service):
    schemas = httpx.get(service.base_url + "/openapi.json", timeout=30).json()["components"]["schemas"]
    assert schemas["Domain"]["properties"]["dmarc"] == {"$ref": "#/components/schemas/DmarcRecord"}
    assert set(schemas["DmarcRecord"]["required"]) >= {"type", "name", "value", "status", "found", "found_at"}
    assert schemas["DomainCheck"]["properties"]["warnings"]["items"] == {"$ref": "#/components/schemas/DomainWarning"}


@pytest.mark.e2e
def test_the_operator_export_also_gives_the_bounce_domains_mx_and_spf(service):
    """The README asks operators to publish an MX and SPF at the bounce domain: the command
    that prints the DKIM zone prints them too, as zone lines and in --json."""
    published = json.loads(run_postroom(service.env, "dkim", "--json").stdout.strip().splitlines()[-1])
    bounce = [r for r in published if r["name"] == "bounces.postroom.test"]
    sending_host = "bounces.postroom.test"  # the suite's EHLO name: BASE_URL is an IP, the machine has no FQDN
    if is_public_host_name(socket.getfqdn()):
        sending_host = socket.getfqdn()
    assert bounce == [{"type": "MX", "name": "bounces.postroom.test", "value": sending_host, "priority": 10},
                      {"type": "TXT", "name": "bounces.postroom.test", "value": f"v=spf1 a:{sending_host} -all"}]
    zone = run_postroom(service.env, "dkim", "--mx", "in.acme.example", "--sending-ip", "192.0.2.7",
                        "--sending-ip", "2001:db8::7").stdout.splitlines()
    assert "bounces.postroom.test. IN MX 10 in.acme.example." in zone
    assert 'bounces.postroom.test. IN TXT "v=spf1 ip4:192.0.2.7 ip6:2001:db8::7 -all"' in zone
    assert "not an IP address" in run_postroom(service.env, "dkim", "--sending-ip", "not-an-ip", expect=2).stderr
