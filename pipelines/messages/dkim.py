"""DKIM (RFC 6376): key pairs for sending domains, and signing composed messages.

Signing is RSA-SHA256 with relaxed/relaxed canonicalisation. The canonicalisation is done
here and the RSA through `cryptography` (~0.7 ms per signature) rather than dkimpy's
pure-Python RSA (~8 ms): signing sits on the render hot path. The tests verify every
signature with dkimpy, so the two cannot drift apart."""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import re
import time
from typing import cast

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from pipelines.core.byte_search import contains
from pipelines.core.secret_box import open_sealed, seal

KEY_BITS = 2048
# Every header a receiver (or its reader) relies on: signed when present, in this order,
# and every one of them named once more in h= than it appears ("oversigned", RFC 6376
# §8.15): a verifier reads the extra name as an absent field, so a From, Subject, List-Id
# … added later breaks the signature, and so does one we never write: a Cc or Sender
# shown to the reader, In-Reply-To/References that thread the mail into a conversation,
# Content-Transfer-Encoding or Content-Disposition that change how the body decodes or
# shows, Auto-Submitted/Precedence that mute auto-replies and change filtering.
SIGNED_HEADERS = ("From", "Sender", "To", "Cc", "Subject", "Date", "Message-ID", "Reply-To",
                  "In-Reply-To", "References", "MIME-Version", "Content-Type", "Content-Transfer-Encoding",
                  "Content-Disposition", "List-Unsubscribe", "List-Unsubscribe-Post", "List-Id", "Feedback-ID",
                  "Auto-Submitted", "Precedence")
_SIGNED_NAMES = tuple(name.lower() for name in SIGNED_HEADERS)
_WSP_RUN = re.compile(rb"[ \t]+")
_WSP_TO_FOLD = re.compile(rb"\t[ \t]*| [ \t]+")  # what differs from one space: not each lone space
_SPACE_AT_LINE_END = re.compile(rb" (?=\n|\Z)")
_B64_LINE_CHARS = 72


@dataclasses.dataclass(frozen=True)
class KeyPair:
    private_pem: str
    public_b64: str  # the p= value: base64 of the DER SubjectPublicKeyInfo

    @property
    def txt_value(self) -> str:
        return txt_value(self.public_b64)


def generate_key_pair() -> KeyPair:
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode("ascii")
    der = key.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return KeyPair(pem, base64.b64encode(der).decode("ascii"))


def new_sealed_key(secret_key: str) -> tuple[str, str]:
    """A fresh key pair as (sealed private PEM, public p= value), ready to store."""
    pair = generate_key_pair()
    return seal(pair.private_pem, secret_key), pair.public_b64


def txt_value(public_b64: str) -> str:
    """The TXT record a verifier fetches at `<selector>._domainkey.<domain>`."""
    return f"v=DKIM1; k=rsa; p={public_b64}"


# --- canonicalisation (RFC 6376 §3.4.2 and §3.4.4) -------------------------------------

def relaxed_header(name: bytes, value: bytes) -> bytes:
    value = value.replace(b"\r\n", b"").replace(b"\n", b"")
    value = _WSP_RUN.sub(b" ", value).strip(b" ")
    return name.strip().lower() + b":" + value


def relaxed_body(body: bytes, *, crlf_only: bool = False) -> bytes:
    """Whitespace runs to one space, none at line ends, no empty lines at the end, CRLF
    line ends. Over the whole body at once: a regex call per line cost more than the RSA
    signature. A body we composed (every line ending CRLF, no space before one: quoted-
    printable encodes it) takes a few C scans and at most one substitution.
    `crlf_only`: the caller knows every line ends CRLF, with no bare CR or LF (what
    pipelines/mime composes), which spares the three scans that check it (~0.08 ms for a
    35 KB message)."""
    if crlf_only or body.count(b"\n") == body.count(b"\r\n") == body.count(b"\r"):
        folded = _WSP_TO_FOLD.sub(b" ", body) if b"\t" in body or contains(body, b"  ") else body
        if not contains(folded, b" \r\n") and not folded.endswith(b" "):
            folded = folded.rstrip(b"\r\n")
            return folded + b"\r\n" if folded else b""
    body = _WSP_TO_FOLD.sub(b" ", body.replace(b"\r\n", b"\n"))
    body = _SPACE_AT_LINE_END.sub(b"", body).rstrip(b"\n")
    return body.replace(b"\n", b"\r\n") + b"\r\n" if body else b""


def split_message(data: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers as (name, raw value incl. folding) in order, and the body."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = data.partition(b"\n\n")
    headers: list[tuple[bytes, bytes]] = []
    for line in re.split(rb"\r?\n", head):
        if line[:1] in (b" ", b"\t") and headers:
            name, value = headers[-1]
            headers[-1] = (name, value + b"\r\n" + line)
        elif b":" in line:
            name, _, value = line.partition(b":")
            headers.append((name, value))
    return headers, body


# --- signing ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Signer:
    domain: str
    selector: str
    key: rsa.RSAPrivateKey

    def sign(self, data: bytes, *, timestamp: int | None = None, crlf_only: bool = False,
             also: tuple[str, ...] = ()) -> bytes:
        """`data` with a DKIM-Signature header prepended (`crlf_only`: see relaxed_body).
        `also`: more header names to sign where present (a sender's own headers, e.g.
        X-Entity-Ref-ID), each instance there is, not oversigned: a hop that adds one
        above ours leaves the signature whole, as the verifier reads the bottom-most."""
        headers, body = split_message(data)
        body_hash = base64.b64encode(hashlib.sha256(relaxed_body(body, crlf_only=crlf_only)).digest()).decode()
        # the bottom-most instance of a name is the one signed first (§5.4.2); we compose each once
        last = {name.strip().lower().decode("ascii", "replace"): (name, value) for name, value in headers}
        names = [wanted for wanted in _SIGNED_NAMES if wanted in last]
        chosen = [last[name] for name in names]
        names += _SIGNED_NAMES  # the absent instances
        extra = [name.lower() for name in also if name.lower() in last and name.lower() not in _SIGNED_NAMES]
        chosen += [last[name] for name in extra]
        names += extra
        tags = ["v=1", "a=rsa-sha256", "c=relaxed/relaxed", f"d={self.domain}",
                f"s={self.selector}", f"t={timestamp if timestamp is not None else int(time.time())}",
                "h=" + _fold_names(names), f"bh={body_hash}", "b="]
        unsigned = ";\r\n\t".join(tags).encode()
        signed_input = b"".join(relaxed_header(n, v) + b"\r\n" for n, v in chosen)
        signed_input += relaxed_header(b"DKIM-Signature", b" " + unsigned)
        signature = base64.b64encode(self.key.sign(signed_input, padding.PKCS1v15(), hashes.SHA256()))
        folded = b"\r\n\t ".join(signature[i:i + _B64_LINE_CHARS]
                                 for i in range(0, len(signature), _B64_LINE_CHARS))
        return b"DKIM-Signature: " + unsigned + folded + b"\r\n" + data

    def __reduce__(self):
        """Pickled as its PEM, so the render processes (actors/render_pool.py) can sign;
        each process parses a key once (`_load_private_key` is cached)."""
        pem = self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()).decode("ascii")
        return _signer_from_pem, (self.domain, self.selector, pem)


def _fold_names(names: list[str]) -> str:
    """The h= list, folded (FWS is allowed around its colons) so no line passes 78."""
    lines, current = [], ""
    for name in names:
        piece = f"{current}:{name}" if current else name
        if len(piece) > 64 and current:
            lines.append(current + ":")
            piece = name
        current = piece
    return "\r\n\t ".join([*lines, current])


@functools.lru_cache(maxsize=256)
def _load_private_key(pem: str) -> rsa.RSAPrivateKey:
    # our keys are RSA (new_sealed_key makes them)
    return cast(rsa.RSAPrivateKey, serialization.load_pem_private_key(pem.encode("ascii"), password=None))


@functools.lru_cache(maxsize=256)
def open_signer(domain: str, selector: str, sealed_private_key: str, secret_key: str) -> Signer:
    """A signer from a stored (sealed) key; cached, as unsealing and PEM parsing cost more
    than a signature."""
    return Signer(domain, selector, _load_private_key(open_sealed(sealed_private_key, secret_key)))


def _signer_from_pem(domain: str, selector: str, pem: str) -> Signer:
    return Signer(domain, selector, _load_private_key(pem))


SHARED = "*"


def signer_key(message: dict) -> str:
    """Which signer a message needs: its workspace's custom domain, or the shared one."""
    if message.get("custom_domain"):
        return f"{message['workspace_id']}:{message['signing_domain']}"
    return SHARED
