"""SPF, DKIM and DMARC of received mail, judged as a receiver judges them: the records sit
in a real DNS server on loopback (tests/support/dns_server.py), read through the service's
own DNS adapter; messages are signed by dkimpy with keys made here."""

from __future__ import annotations

import dkim as dkimpy
import pytest

from pipelines.adapters.dns_client import DnsPythonResolver
from pipelines.inbound.authentication import authenticate, check_spf
from pipelines.inbound.dmarc import organisational_domain
from pipelines.messages.dkim import generate_key_pair

PAIR = generate_key_pair()
OTHER_PAIR = generate_key_pair()
CLIENT = "192.0.2.10"


@pytest.fixture(scope="module")
def resolver(dns_server):
    zone = {
        # SPF
        ("pass.example", "TXT"): ["v=spf1 ip4:192.0.2.0/24 -all"],
        ("fail.example", "TXT"): ["v=spf1 ip4:198.51.100.1 -all"],
        ("soft.example", "TXT"): ["v=spf1 ~all"],
        ("neutral.example", "TXT"): ["v=spf1 ?all"],
        ("nospf.example", "TXT"): ["some other text"],
        ("two.example", "TXT"): ["v=spf1 -all", "v=spf1 +all"],
        ("include.example", "TXT"): ["v=spf1 include:_spf.provider.example -all"],
        ("_spf.provider.example", "TXT"): ["v=spf1 a:out.provider.example mx -all"],
        ("out.provider.example", "A"): ["192.0.2.10"],
        ("mx.example", "TXT"): ["v=spf1 mx/24 -all"],
        ("mx.example", "MX"): ["10 mail.mx.example"],
        ("mail.mx.example", "A"): ["192.0.2.200"],
        ("redirect.example", "TXT"): ["v=spf1 redirect=pass.example"],
        ("six.example", "TXT"): ["v=spf1 ip6:2001:db8::/32 -all"],
        ("sixhost.example", "TXT"): ["v=spf1 a:out6.sixhost.example/24//64 -all"],
        ("out6.sixhost.example", "AAAA"): ["2001:db8:6::1"],
        ("macro.example", "TXT"): ["v=spf1 exists:%{ir}._ip.macro.example -all"],
        ("10.2.0.192._ip.macro.example", "A"): ["127.0.0.2"],
        ("loop.example", "TXT"): ["v=spf1 include:loop.example -all"],
        ("many.example", "TXT"): ["v=spf1 " + " ".join(f"a:h{n}.many.example" for n in range(11)) + " -all"],
        # DKIM and DMARC
        ("s1._domainkey.signed.example", "TXT"): [PAIR.txt_value],
        ("s1._domainkey.provider.example", "TXT"): [OTHER_PAIR.txt_value],
        ("signed.example", "TXT"): ["v=spf1 ip4:192.0.2.0/24 -all"],
        ("_dmarc.signed.example", "TXT"): ["v=DMARC1; p=reject; adkim=s"],
        ("_dmarc.pass.example", "TXT"): ["v=DMARC1; p=quarantine"],
        ("_dmarc.org.example", "TXT"): ["v=DMARC1; p=reject; sp=quarantine"],
        ("bounces.org.example", "TXT"): ["v=spf1 ip4:192.0.2.10 -all"],
        ("_dmarc.strict.example", "TXT"): ["v=DMARC1; p=reject; aspf=s"],
        ("mail.strict.example", "TXT"): ["v=spf1 ip4:192.0.2.10 -all"],
    }
    for (name, rtype), values in zone.items():
        dns_server.set(name, rtype, *values)
    return DnsPythonResolver(dns_server.address, timeout_seconds=2)


async def spf(resolver, mail_from: str, client_ip: str = CLIENT, helo: str = "mta.sender.example") -> str:
    return (await check_spf(client_ip=client_ip, helo=helo, mail_from=mail_from, resolver=resolver))["result"]


@pytest.mark.parametrize(("mail_from", "expected"), [
    ("a@pass.example", "pass"), ("a@fail.example", "fail"), ("a@soft.example", "softfail"),
    ("a@neutral.example", "neutral"), ("a@nospf.example", "none"), ("a@nowhere.example", "none"),
    ("a@two.example", "permerror"), ("a@include.example", "pass"), ("a@redirect.example", "pass"),
    ("a@macro.example", "pass"), ("a@loop.example", "permerror"), ("a@many.example", "permerror"),
])
async def test_spf_verdict_for_the_mail_from_domain(resolver, mail_from, expected):
    assert await spf(resolver, mail_from) == expected


async def test_spf_checks_mx_hosts_with_their_cidr_and_ipv6_networks(resolver):
    assert await spf(resolver, "a@mx.example", client_ip="192.0.2.99") == "pass"  # mail.mx.example's /24
    assert await spf(resolver, "a@mx.example", client_ip="198.51.100.7") == "fail"
    assert await spf(resolver, "a@six.example", client_ip="2001:db8::25") == "pass"
    assert await spf(resolver, "a@six.example", client_ip="2001:db9::25") == "fail"
    assert await spf(resolver, "a@sixhost.example", client_ip="2001:db8:6::77") == "pass"  # its AAAA's /64
    assert await spf(resolver, "a@sixhost.example", client_ip="2001:db8:7::1") == "fail"


async def test_spf_of_a_null_sender_checks_the_helo_name(resolver):
    result = await check_spf(client_ip=CLIENT, helo="pass.example", mail_from="", resolver=resolver)
    assert result == {"result": "pass", "domain": "pass.example"}


async def test_spf_is_temperror_when_dns_does_not_answer():
    silent = DnsPythonResolver("127.0.0.1:9", timeout_seconds=0.2)  # the discard port: no DNS server there
    assert await spf(silent, "a@pass.example") == "temperror"


def signed(body: bytes = b"Hello Bob,\r\n\r\nThe report is attached.\r\n", *, from_domain: str = "signed.example",
           domain: bytes = b"signed.example", pair=PAIR) -> bytes:
    message = (f"From: Ann <ann@{from_domain}>\r\nTo: bob@receiver.example\r\nSubject: Report\r\n"
               f"Date: Mon, 01 Jan 2024 10:00:00 +0000\r\nMessage-ID: <r1@{from_domain}>\r\n\r\n").encode() + body
    signature = dkimpy.sign(message, b"s1", domain, pair.private_pem.encode(),
                            include_headers=[b"from", b"to", b"subject", b"date", b"message-id"])
    return signature + message


async def test_a_signed_message_passes_dkim_spf_and_dmarc(resolver):
    results = await authenticate(signed(), client_ip=CLIENT, helo="mta.signed.example",
                                 mail_from="bounce@signed.example", resolver=resolver)
    assert results["dkim"] == [{"result": "pass", "domain": "signed.example", "selector": "s1"}]
    assert results["spf"] == {"result": "pass", "domain": "signed.example"}
    assert results["dmarc"] == {"result": "pass", "policy": "reject", "domain": "signed.example",
                                "aligned_spf": True, "aligned_dkim": True}
    assert results["summary"] == ("spf=pass smtp.mailfrom=bounce@signed.example; "
                                  "dkim=pass header.d=signed.example header.s=s1; "
                                  "dmarc=pass (p=reject) header.from=signed.example")


async def test_a_changed_body_or_header_fails_dkim_and_then_dmarc(resolver):
    message = signed()
    for tampered in (message.replace(b"attached", b"deleted"), message.replace(b"Subject: Report", b"Subject: Pay")):
        results = await authenticate(tampered, client_ip="198.51.100.1", helo="evil.example",
                                     mail_from="x@evil.example", resolver=resolver)
        assert results["dkim"][0]["result"] == "fail"
        assert results["dmarc"]["result"] == "fail" and results["dmarc"]["policy"] == "reject"
        assert "dkim=fail header.d=signed.example" in results["summary"]


async def test_each_signature_has_its_own_verdict(resolver):
    # a mailing list re-signs with its own domain after changing the subject: the author's
    # signature breaks, the list's passes
    original = signed()
    changed = original.replace(b"Subject: Report", b"Subject: [list] Report")
    list_signature = dkimpy.sign(changed, b"s1", b"provider.example", OTHER_PAIR.private_pem.encode(),
                                 include_headers=[b"from", b"subject"])
    results = await authenticate(list_signature + changed, client_ip=CLIENT, helo="h.example", mail_from="",
                                 resolver=resolver)
    assert results["dkim"] == [{"result": "pass", "domain": "provider.example", "selector": "s1"},
                               {"result": "fail", "domain": "signed.example", "selector": "s1"}]
    assert "dkim=pass header.d=provider.example header.s=s1; dkim=fail header.d=signed.example" in results["summary"]


async def test_a_signature_whose_key_is_not_published_is_a_permanent_error(resolver):
    message = signed(domain=b"unpublished.example")
    results = await authenticate(message, client_ip=CLIENT, helo="h.example", mail_from="", resolver=resolver)
    assert results["dkim"] == [{"result": "permerror", "domain": "unpublished.example", "selector": "s1"}]


async def test_dkim_of_a_third_party_domain_passes_but_does_not_align(resolver):
    # a provider signs with its own domain; SPF for another domain: DMARC fails under strict DKIM alignment
    message = signed(domain=b"provider.example", pair=OTHER_PAIR)
    results = await authenticate(message, client_ip="198.51.100.1", helo="out.provider.example",
                                 mail_from="b@provider.example", resolver=resolver)
    assert results["dkim"][0]["result"] == "pass"
    assert results["dmarc"]["aligned_dkim"] is False and results["dmarc"]["result"] == "fail"


async def test_relaxed_alignment_accepts_a_subdomain_and_the_organisation_policy_applies(resolver):
    message = signed(from_domain="news.org.example", domain=b"signed.example")
    results = await authenticate(message, client_ip=CLIENT, helo="h.example", mail_from="b@bounces.org.example",
                                 resolver=resolver)
    # no record at _dmarc.news.org.example: org.example's, whose sp= governs its subdomains
    assert results["dmarc"] == {"result": "pass", "policy": "quarantine", "domain": "news.org.example",
                                "aligned_spf": True, "aligned_dkim": False}


async def test_strict_spf_alignment_wants_the_same_domain(resolver):
    message = signed(from_domain="strict.example", domain=b"unpublished.example")
    results = await authenticate(message, client_ip=CLIENT, helo="h.example", mail_from="b@mail.strict.example",
                                 resolver=resolver)
    assert results["spf"]["result"] == "pass"
    assert results["dmarc"]["result"] == "fail" and results["dmarc"]["aligned_spf"] is False


async def test_dmarc_judges_the_address_not_a_display_name_dressed_as_one(resolver):
    message = b"From: ann@signed.example <ann@evil.example>\r\nTo: b@x.example\r\nSubject: hi\r\n\r\nhi\r\n"
    results = await authenticate(message, client_ip="198.51.100.1", helo="h.example", mail_from="x@evil.example",
                                 resolver=resolver)
    assert results["dmarc"]["domain"] == "evil.example" and results["dmarc"]["result"] == "none"


async def test_no_dmarc_record_and_no_signature(resolver):
    message = b"From: a@nospf.example\r\nTo: b@x.example\r\nSubject: hi\r\n\r\nhi\r\n"
    results = await authenticate(message, client_ip=CLIENT, helo="h.example", mail_from="a@nospf.example",
                                 resolver=resolver)
    assert results["dkim"] == [] and results["dmarc"]["result"] == "none" and results["dmarc"]["policy"] is None
    assert results["summary"] == ("spf=none smtp.mailfrom=a@nospf.example; dkim=none; "
                                  "dmarc=none header.from=nospf.example")


def test_the_organisational_domain_comes_from_the_public_suffix_list():
    assert organisational_domain("mail.news.example.co.uk") == "example.co.uk"
    assert organisational_domain("a.b.example.com") == "example.com"
    assert organisational_domain("user.github.io") == "user.github.io"
