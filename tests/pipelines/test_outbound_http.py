"""The outbound HTTP guard against a real loopback receiver: refused when private
targets are not allowed (nothing reaches the receiver), delivered when they are, with the
original Host header and TLS name although the connection goes to the resolved address."""

import datetime as dt
import ipaddress
import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pipelines.adapters import http_client as outbound_http
from pipelines.core.targets import address_problem, target_problem
from tests.support.http_receiver import HttpReceiver


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


async def test_loopback_receiver_is_refused_when_private_targets_are_not_allowed(receiver):
    result = await outbound_http.post(receiver.url, b"{}", {"Content-Type": "application/json"},
                                      allow_private=False)
    assert result.status_code == 0 and not result.ok and result.permanent
    assert result.error == "refused: not a public address"
    assert receiver.received() == []


async def test_a_name_resolving_to_loopback_is_refused_after_resolution_without_naming_the_address(receiver):
    """Resolution checks every address (`localhost` stands for any name that resolves to
    loopback; `post` already refuses that name before DNS): refused, and the message does
    not say what it resolved to (no DNS oracle for tenants)."""
    assert "127.0.0.1" in await outbound_http.resolve_checked("localhost", receiver.port, allow_private=True)
    with pytest.raises(outbound_http.TargetRefused) as refused:
        await outbound_http.resolve_checked("localhost", receiver.port, allow_private=False)
    assert str(refused.value) == "not a public address"
    for url in (f"http://localhost:{receiver.port}/hook", f"http://LocalHost.:{receiver.port}/hook"):
        result = await outbound_http.post(url, b"{}", {}, allow_private=False)
        assert result.error == "refused: not a public address" and result.permanent
    assert receiver.received() == []


async def test_loopback_receiver_gets_the_exact_body_when_private_targets_are_allowed(receiver):
    body = b'{"event":"contact.created","data":{"x":"\xc3\xa9"}}'
    result = await outbound_http.post(receiver.url, body, {"Content-Type": "application/json",
                                                           "X-Service-Event": "contact.created"},
                                      allow_private=True)
    assert result.ok and result.status_code == 200 and result.error is None
    assert result.response_excerpt == '{"ok":true}'
    [request] = receiver.received()
    assert request.body == body
    assert request.headers["x-service-event"] == "contact.created"


async def test_the_original_host_name_is_sent_although_the_resolved_address_is_dialled(receiver):
    url = f"http://localhost:{receiver.port}/hook"
    result = await outbound_http.post(url, b"{}", {}, allow_private=True)
    assert result.ok
    assert receiver.received()[0].headers["host"] == f"localhost:{receiver.port}"


async def test_error_answers_are_reported_with_their_status(receiver):
    receiver.fail_next(1, status=503)
    result = await outbound_http.post(receiver.url, b"{}", {}, allow_private=True)
    assert (result.status_code, result.ok, result.error) == (503, False, "HTTP 503")


async def test_redirects_are_not_followed(receiver):
    receiver.fail_next(1, status=302)
    result = await outbound_http.post(receiver.url, b"{}", {}, allow_private=True)
    assert result.status_code == 302 and not result.ok
    assert len(receiver.received()) == 1


async def test_a_closed_port_is_a_connection_failure_with_status_zero(receiver):
    receiver.stop()
    result = await outbound_http.post(receiver.url, b"{}", {}, allow_private=True)
    assert result.status_code == 0 and result.error and not result.error.startswith("refused")
    assert not result.permanent  # the receiver may come back


UNPARSEABLE = ["http://0177.0.0.1:{port}/", "http://127.000.000.001:{port}/", "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ:{port}/",
               "http://ｌｏｃａｌｈｏｓｔ:{port}/", "http://0x7f.1:{port}/", "http://127.1:{port}/",
               "http://2130706433:{port}/", "http://[fe80::1%25lo]:{port}/", "http://127.0.0.1:99999/"]


@pytest.mark.parametrize("template", UNPARSEABLE)
async def test_a_url_the_sender_cannot_read_is_a_permanent_refusal_never_an_exception(receiver, template):
    """Stored before creation checked with the sender's parser (or written by hand): the
    attempt ends with a result to record, marked permanent, and nothing is sent."""
    result = await outbound_http.post(template.format(port=receiver.port), b"{}", {}, allow_private=True)
    assert result.status_code == 0 and result.permanent and result.error.startswith("refused: the URL ")
    assert receiver.received() == []


async def test_a_slow_receiver_times_out(receiver):
    receiver.delay_seconds = 1.5
    result = await outbound_http.post(receiver.url, b"{}", {}, allow_private=True, timeout_seconds=0.3)
    assert result.status_code == 0 and "timed out" in result.error
    assert result.duration_ms < 1400


def _tls_pair():
    """A CA and a server certificate for the name `localhost` only (no IP in it)."""
    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(1)
          .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return ca, leaf, key


async def test_https_checks_the_certificate_against_the_name_while_dialling_the_address(tmp_path):
    ca, leaf, key = _tls_pair()
    (tmp_path / "cert.pem").write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    client_tls = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    receiver = HttpReceiver(tls=server_tls, url_host="localhost").start()
    try:
        ok = await outbound_http.post(receiver.url, b"{}", {}, allow_private=True, tls=client_tls)
        assert ok.ok, ok.error
        by_ip = await outbound_http.post(f"https://127.0.0.1:{receiver.port}/hook", b"{}", {},
                                         allow_private=True, tls=client_tls)
        assert by_ip.status_code == 0 and "certificate" in by_ip.error.lower()
    finally:
        receiver.stop()
    assert len(receiver.received()) == 1


@pytest.mark.parametrize("address", [
    "127.0.0.1", "::1", "10.0.0.5", "172.16.3.4", "192.168.1.1", "fd12:3456::1", "169.254.10.1", "fe80::1",
    "100.64.0.9", "224.0.0.251", "ff02::1", "ff0e::1", "0.0.0.0", "::", "::ffff:10.0.0.1", "2002:a00:1::",
    "64:ff9b::7f00:1", "240.0.0.1", "255.255.255.255", "198.18.0.1", "192.0.2.1", "2001:db8::1", "100::1",
    # what Python 3.11's ipaddress still calls global: site-local, 6to4 relay anycast, documentation
    "fec0::1", "fefe::1", "192.88.99.1", "192.88.99.254", "3fff::1", "3fff:fff::1",
    "5f00::1", "64:ff9b:1::1",
])
def test_addresses_that_are_not_public_are_refused_without_being_named(address):
    assert address_problem(ipaddress.ip_address(address)) == "not a public address"


@pytest.mark.parametrize("address", ["169.254.169.254", "fd00:ec2::254", "100.100.100.200"])
def test_cloud_metadata_addresses_are_refused_as_such(address):
    assert address_problem(ipaddress.ip_address(address)) == "a cloud metadata address"


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "93.184.216.34",
                                     "192.88.98.1", "192.88.100.1", "3fff:1000::1", "2620:4f:8000::1",
                                     "2002:808:808::1", "64:ff9b::808:808"])
def test_public_addresses_pass(address):
    assert address_problem(ipaddress.ip_address(address)) is None


def test_allowing_private_targets_still_refuses_cloud_metadata():
    assert address_problem(ipaddress.ip_address("10.0.0.1"), allow_private=True) is None
    assert address_problem(ipaddress.ip_address("127.0.0.1"), allow_private=True) is None
    assert "metadata" in address_problem(ipaddress.ip_address("169.254.169.254"), allow_private=True)


@pytest.mark.parametrize("url, problem", [
    ("ftp://example.com/x", "http or https"), ("example.com/hook", "http or https"),
    ("http:///path", "host"), ("https://user:pw@example.com/", "credentials"),
    ("https://@example.com/", "credentials"), ("http://example.com:99999/", "valid URL"),
    ("http://example.com:0/", "valid URL"), ("https://example.com/" + "a" * 2030, "2048"),
    ("https://exa mple.com/", "white space"), ("https://example.com/\x00", "control"),
    ("http://example.com\\@evil.example/", "backslash"), ("http://a..b/", "valid host"),
    ("http://ex%41mple.com/", "valid host"), ("http://[fe80::1%25eth0]/", "valid host"),
    # read as another address by resolvers, or not readable by the sender at all
    ("http://0177.0.0.1:18150/", "valid URL"), ("http://127.000.000.001/", "valid URL"),
    ("http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/", "valid URL"), ("http://ｌｏｃａｌｈｏｓｔ/", "valid URL"),
    ("http://0x7f.1/", "four decimal numbers"), ("http://127.1/", "four decimal numbers"),
    ("http://2130706433/", "four decimal numbers"), ("http://1.2.3.4.5/", "four decimal numbers"),
])
def test_malformed_target_urls_are_explained_whether_or_not_private_targets_are_allowed(url, problem):
    for allow_private in (False, True):
        assert problem in target_problem(url, allow_private)


@pytest.mark.parametrize("url", [
    "https://hooks.example.com/postroom?x=1", "http://[2606:4700::1]:8080/x", "https://example.com/" + "a" * 2028,
    "http://bücher.example/hook", "http://under_score.example./x", "http://example.com?@not-userinfo",
    "http://8.8.8.8/x",
])
def test_wellformed_public_target_urls_pass(url):
    assert target_problem(url, allow_private=False) is None


def test_literal_private_hosts_are_caught_without_dns():
    for url in ("http://127.0.0.1:9/x", "http://localhost/x", "http://LOCALHOST./x", "http://[fd00::1]/x",
                "http://[::ffff:127.0.0.1]/x", "http://[fec0::1]/x", "http://192.88.99.1/x", "http://[3fff::1]/x"):
        assert target_problem(url, allow_private=False) == "points at an address that is not public", url
        assert target_problem(url, allow_private=True) is None
    assert target_problem("http://169.254.169.254/", allow_private=True) == "points at a cloud metadata address"
