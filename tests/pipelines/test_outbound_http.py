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

from pipelines import outbound_http
from pipelines.outbound_http import address_problem, literal_target_problem, url_problem
from tests.support.http_receiver import HttpReceiver


@pytest.fixture
def receiver():
    server = HttpReceiver().start()
    yield server
    server.stop()


async def test_loopback_receiver_is_refused_when_private_targets_are_not_allowed(receiver):
    result = await outbound_http.post(receiver.url, b"{}", {"Content-Type": "application/json"},
                                      allow_private=False)
    assert result.status_code == 0 and not result.ok
    assert result.error.startswith("refused:") and "loopback" in result.error
    assert receiver.received() == []


async def test_a_name_resolving_to_loopback_is_refused_after_resolution(receiver):
    url = f"http://localhost:{receiver.port}/hook"
    result = await outbound_http.post(url, b"{}", {}, allow_private=False)
    assert "localhost resolves to a loopback address (127.0.0.1)" in result.error
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


async def test_a_slow_receiver_times_out(receiver):
    receiver.delay_seconds = 1.5
    result = await outbound_http.post(receiver.url, b"{}", {}, allow_private=True, timeout_seconds=0.3)
    assert result.status_code == 0 and "timed out" in result.error
    assert result.duration_ms < 1400


def _tls_pair():
    """A CA and a server certificate for the name `localhost` only (no IP in it)."""
    now = dt.datetime.now(dt.timezone.utc)
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


@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("10.0.0.5", "private"),
    ("172.16.3.4", "private"), ("192.168.1.1", "private"), ("fd12:3456::1", "private"),
    ("169.254.10.1", "link-local"), ("fe80::1", "link-local"), ("100.64.0.9", "CGNAT"),
    ("224.0.0.251", "multicast"), ("ff02::1", "multicast"), ("0.0.0.0", "unspecified"),
    ("::", "unspecified"), ("169.254.169.254", "metadata"), ("fd00:ec2::254", "metadata"),
    ("::ffff:10.0.0.1", "private"), ("2002:a00:1::", "private"), ("64:ff9b::7f00:1", "loopback"),
    ("240.0.0.1", "reserved"),
])
def test_non_public_addresses_are_refused_with_a_reason(address, reason):
    problem = address_problem(ipaddress.ip_address(address))
    assert problem is not None and reason.lower() in problem.lower()


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "93.184.216.34"])
def test_public_addresses_pass(address):
    assert address_problem(ipaddress.ip_address(address)) is None


def test_allowing_private_targets_still_refuses_cloud_metadata():
    assert address_problem(ipaddress.ip_address("10.0.0.1"), allow_private=True) is None
    assert address_problem(ipaddress.ip_address("127.0.0.1"), allow_private=True) is None
    assert "metadata" in address_problem(ipaddress.ip_address("169.254.169.254"), allow_private=True)


@pytest.mark.parametrize("url, problem", [
    ("ftp://example.com/x", "http or https"), ("example.com/hook", "http or https"),
    ("http:///path", "host"), ("https://user:pw@example.com/", "credentials"),
    ("http://example.com:99999/", "valid URL"), ("https://example.com/" + "a" * 2030, "2048"),
    ("https://exa mple.com/", "white space"),
])
def test_malformed_target_urls_are_explained(url, problem):
    assert problem in url_problem(url)


def test_wellformed_target_urls_pass():
    assert url_problem("https://hooks.example.com/postroom?x=1") is None
    assert url_problem("http://[2606:4700::1]:8080/x") is None
    assert url_problem("https://example.com/" + "a" * (2048 - 20)) is None


def test_literal_private_hosts_are_caught_without_dns():
    assert "loopback" in literal_target_problem("http://127.0.0.1:9/x", allow_private=False)
    assert "loopback" in literal_target_problem("http://localhost/x", allow_private=False)
    assert "private" in literal_target_problem("http://[fd00::1]/x", allow_private=False)
    assert literal_target_problem("http://127.0.0.1:9/x", allow_private=True) is None
    assert literal_target_problem("https://hooks.example.com/x", allow_private=False) is None
