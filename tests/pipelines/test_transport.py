"""The SMTP client against a real receiver (aiosmtpd): what it says in EHLO, when it
encrypts, when it refuses to log in, how it writes international addresses, and that
whatever happens comes back as per-recipient outcomes, never as an exception."""

from __future__ import annotations

import pytest

from ops.embedded_store import free_port
from pipelines.adapters.smtp_client import SmtpTransport, helo_name, tls_context
from tests.support.smtp_sink import SmtpSink
from tests.support.tls import make_certificate

MAIL_FROM = "bounce+msg_1@bounces.postroom.test"


def mime(to: str = "reader@example.org") -> bytes:
    return (f"Message-ID: <msg_1@postroom.test>\r\nFrom: a@postroom.test\r\nTo: {to}\r\nSubject: Hi\r\n\r\n"
            "Hello\r\n").encode()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    return make_certificate(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def sinks():
    started = []

    def start(**options) -> SmtpSink:
        sink = SmtpSink(**options).start()
        started.append(sink)
        return sink
    yield start
    for sink in started:
        sink.stop()


async def send(transport: SmtpTransport, recipients: list[str], data: bytes | None = None):
    try:
        return await transport.send(MAIL_FROM, recipients, data or mime(recipients[0]), "msg_1")
    finally:
        await transport.close()


async def test_ehlo_gives_the_configured_name(sinks):
    sink = sinks()
    outcomes = await send(SmtpTransport(sink.url, helo="mail.acme.example"), ["reader@example.org"])
    assert outcomes["reader@example.org"].accepted
    assert sink.messages_to("reader@example.org")[0].helo == "mail.acme.example"


def test_the_default_ehlo_name_is_the_public_host_of_the_service_else_the_machine_else_the_bounce_domain():
    bounces = "bounces.acme.example"
    assert helo_name(None, "https://mail.acme.example/", bounces) == "mail.acme.example"
    assert helo_name(None, "http://127.0.0.1:8080", bounces, fqdn="mx1.acme.example") == "mx1.acme.example"
    for machine in ("localhost", "vm", "localhost.localdomain", "vm.localdomain", "127.0.0.1", "[10.0.0.1]"):
        for base_url in ("http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080", "http://vm:8080"):
            assert helo_name(None, base_url, bounces, fqdn=machine) == bounces
    assert helo_name("relay-out.acme.example", "https://mail.acme.example", bounces) == "relay-out.acme.example"


async def test_starttls_is_used_when_offered_and_the_certificate_is_verified(sinks, certificate):
    sink = sinks(tls=certificate)
    trusted = SmtpTransport(sink.url, tls=tls_context(ca_file=str(certificate.cert_file)))
    assert (await send(trusted, ["reader@example.org"]))["reader@example.org"].accepted
    assert sink.messages_to("reader@example.org")[0].tls is True


async def test_an_untrusted_certificate_fails_the_transaction_transiently_and_sends_nothing_in_clear(
        sinks, certificate):
    sink = sinks(tls=certificate)
    outcome = (await send(SmtpTransport(sink.url), ["reader@example.org"]))["reader@example.org"]
    assert outcome.transient and "CERTIFICATE_VERIFY_FAILED" in outcome.text
    assert sink.messages_to("reader@example.org") == []
    # an operator who cannot add the relay's CA may switch verification off: still encrypted
    unverified = SmtpTransport(sink.url, tls=tls_context(verify=False))
    assert (await send(unverified, ["reader@example.org"]))["reader@example.org"].accepted
    assert sink.messages_to("reader@example.org")[0].tls is True


async def test_smtps_is_implicit_tls(sinks, certificate):
    sink = sinks(tls=certificate, implicit_tls=True)
    assert sink.url.startswith("smtps://")
    transport = SmtpTransport(sink.url, tls=tls_context(ca_file=str(certificate.cert_file)))
    assert (await send(transport, ["reader@example.org"]))["reader@example.org"].accepted
    assert sink.messages_to("reader@example.org")[0].tls is True


async def test_credentials_are_never_sent_to_a_server_without_tls(sinks):
    sink = sinks(auth=True, auth_in_clear=True)  # offers AUTH on a plain connection
    user_url = sink.url.replace("smtp://", "smtp://user:secret@")
    outcome = (await send(SmtpTransport(user_url), ["reader@example.org"]))["reader@example.org"]
    assert outcome.transient and "never sent in clear" in outcome.text
    assert sink.handler.logins == [] and sink.messages_to("reader@example.org") == []


async def test_credentials_go_over_starttls(sinks, certificate):
    sink = sinks(tls=certificate, auth=True)
    user_url = sink.url.replace("smtp://", "smtp://user%40acme:se%2Fcret@")
    transport = SmtpTransport(user_url, tls=tls_context(ca_file=str(certificate.cert_file)))
    assert (await send(transport, ["reader@example.org"]))["reader@example.org"].accepted
    assert sink.handler.logins == [("user@acme", True)]
    assert sink.messages_to("reader@example.org")[0].login == "user@acme"


async def test_a_unicode_domain_goes_out_as_a_labels_and_its_outcome_keeps_the_address_as_given(sinks):
    sink = sinks()
    outcomes = await send(SmtpTransport(sink.url), ["kunde@bücher.example"],
                          mime("kunde@xn--bcher-kva.example"))
    assert list(outcomes) == ["kunde@bücher.example"] and outcomes["kunde@bücher.example"].accepted
    [received] = sink.messages_to("kunde@xn--bcher-kva.example")
    assert received.rcpt_tos == ["kunde@xn--bcher-kva.example"] and "SMTPUTF8" not in received.mail_options


async def test_a_non_ascii_local_part_without_smtputf8_is_refused_here_for_good(sinks):
    sink = sinks(smtputf8=False)
    outcome = (await send(SmtpTransport(sink.url), ["jürgen@example.com"]))["jürgen@example.com"]
    assert outcome.permanent and outcome.local
    assert "SMTPUTF8" in outcome.text and "jürgen@example.com" in outcome.text
    assert sink.handler.received == []


async def test_a_non_ascii_local_part_goes_out_over_smtputf8_when_offered(sinks):
    sink = sinks(smtputf8=True)
    outcomes = await send(SmtpTransport(sink.url), ["jürgen@bücher.example"], mime("jürgen@xn--bcher-kva.example"))
    assert outcomes["jürgen@bücher.example"].accepted
    [received] = sink.handler.received
    assert received.rcpt_tos == ["jürgen@xn--bcher-kva.example"] and "SMTPUTF8" in received.mail_options
    assert received.message["To"] == "jürgen@xn--bcher-kva.example"


async def test_one_unwritable_address_fails_alone_and_nothing_escapes(sinks):
    sink = sinks()
    bad_domain, injected = "someone@a☃.example", "x@example.org\r\nRCPT TO:<victim@example.org>"
    outcomes = await send(SmtpTransport(sink.url), [bad_domain, "reader@example.org"], mime())
    assert outcomes[bad_domain].permanent and outcomes[bad_domain].local and "A-label" in outcomes[bad_domain].text
    assert outcomes["reader@example.org"].accepted
    outcomes = await send(SmtpTransport(sink.url), [injected], mime())
    assert outcomes[injected].permanent and outcomes[injected].local
    assert sink.messages_to("victim@example.org") == []


async def test_a_relay_that_is_down_is_a_transient_outcome():
    outcome = (await send(SmtpTransport(f"smtp://127.0.0.1:{free_port()}"), ["reader@example.org"]))
    assert outcome["reader@example.org"].transient and "connection failed" in outcome["reader@example.org"].text


async def test_lines_starting_with_a_dot_and_bare_line_ends_arrive_as_written(sinks):
    """The transaction dot-stuffs and normalises line ends itself (not aiosmtplib's
    sendmail): the receiver must get the message back byte for byte, a leading dot kept."""
    sink = sinks()
    body = ".first line starts with a dot\r\n..two dots\r\nmiddle\r\n.\r\nlast"
    data = (mime().decode().replace("Hello\r\n", body)).encode()
    outcomes = await send(SmtpTransport(sink.url), ["reader@example.org"], data)
    assert outcomes["reader@example.org"].accepted
    [received] = sink.messages_to("reader@example.org")
    assert received.data.replace(b"\r\n", b"\n").rstrip(b"\n").endswith(body.replace("\r\n", "\n").encode())
    [size] = [o for o in received.mail_options if o.upper().startswith("SIZE=")]  # aiosmtpd offers SIZE
    # the message as transmitted (its last line ended), before dot-stuffing
    assert int(size.split("=")[1]) == len(data + b"\r\n")

    bare = mime().replace(b"\r\n", b"\n")  # lone LFs become CRLF on the wire
    assert (await send(SmtpTransport(sink.url), ["other@example.org"], bare))["other@example.org"].accepted
    [received] = sink.messages_to("other@example.org")
    assert received.message["Subject"] == "Hi" and received.message.get_payload().strip() == "Hello"


async def test_a_refused_recipient_fails_alone_and_the_connection_sends_the_next_message(sinks):
    sink = sinks()
    sink.reject("gone@example.org", 550, "5.1.1 no such user")
    transport = SmtpTransport(sink.url, size=1)
    try:
        outcomes = await transport.send(MAIL_FROM, ["gone@example.org", "reader@example.org"], mime(), "msg_1")
        assert outcomes["gone@example.org"].code == 550 and "no such user" in outcomes["gone@example.org"].text
        assert outcomes["reader@example.org"].accepted
        only_refused = await transport.send(MAIL_FROM, ["gone@example.org"], mime(), "msg_2")
        assert only_refused["gone@example.org"].permanent and not only_refused["gone@example.org"].local
        after = await transport.send(MAIL_FROM, ["next@example.org"], mime("next@example.org"), "msg_3")
        assert after["next@example.org"].accepted   # the envelope was reset on the same connection
    finally:
        await transport.close()
    assert [r.rcpt_tos for r in sink.handler.received] == [["reader@example.org"], ["next@example.org"]]
