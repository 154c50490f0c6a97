"""E-mail address syntax and normalisation (no DNS look-ups at request time).

Three forms of one address, each with its use:
- `normalize`: what we store and show — the address as the client wrote it, domain
  lower-cased (a Unicode domain NFC-normalised, an A-label domain kept as A-labels).
  `user@xn--bcher-kva.example` stays so; `kunde@Bücher.example` becomes `kunde@bücher.example`.
- `wire_form`: what goes to SMTP and into the To: header — the domain in A-labels (IDNA
  2008 with the UTS 46 mapping), the local part as given. A non-ASCII local part cannot
  be written in ASCII at all: such an address goes out only over SMTPUTF8.
- `match_key`: how two spellings of one mailbox are matched (contacts, suppressions):
  lower-cased, the domain in its Unicode form, so the A-label and U-label spellings of an
  address are the same contact and the same suppression."""

from __future__ import annotations

import re

import idna
from email_validator import EmailNotValidError, ValidatedEmail, validate_email

MAX_LENGTH = 254

# What would break out of an SMTP command or a header: controls, spaces, angle brackets
# (one C scan; a per-character Python test cost more than the rest of the transaction's
# address handling).
_UNWRITABLE = re.compile(r"[\x00-\x20<>\x7f]")


def _validated(address: str) -> ValidatedEmail:
    if len(address) > MAX_LENGTH:
        raise ValueError(f"email address longer than {MAX_LENGTH} characters")
    if "=?" in address:  # valid atext, but mail readers decode it as an RFC 2047 encoded word
        raise ValueError("an email address must not contain '=?'")
    try:
        return validate_email(address, check_deliverability=False, allow_smtputf8=True)
    except EmailNotValidError as error:
        raise ValueError(str(error)) from None


def normalize(address: str) -> str:
    """The stored form (see the module docstring) or ValueError."""
    result = _validated(address)
    domain = result.ascii_domain if address.rpartition("@")[2].isascii() else result.domain
    return f"{result.local_part}@{domain}"


def contact_key(address: str) -> str:
    """How contacts are matched: the whole address lower-cased, the domain as Unicode."""
    return _validated(address).normalized.lower()


def match_key(address: str) -> str:
    """`contact_key` for any stored address (those already valid); a string that is not
    a valid address is matched as it is, lower-cased."""
    lowered = address.lower()
    if lowered.isascii() and "xn--" not in lowered:
        return lowered  # the common case, without the validator's cost
    try:
        return contact_key(address)
    except ValueError:
        return lowered


def wire_form(address: str) -> str:
    """The address as SMTP and the To: header carry it: the domain in A-labels, the local
    part untouched. ValueError when the domain cannot be written in A-labels, or the
    address holds what would break out of an SMTP command or header (controls, spaces,
    angle brackets)."""
    if _UNWRITABLE.search(address):
        raise ValueError(f"the address {address!r} contains a control character, space or angle bracket")
    local, _, domain = address.rpartition("@")
    if domain.isascii():
        return address
    try:
        ascii_domain = idna.encode(domain, uts46=True).decode("ascii")
    except idna.IDNAError as error:
        raise ValueError(f"the domain {domain} cannot be written as an IDNA A-label: {error}") from None
    return f"{local}@{ascii_domain}"
