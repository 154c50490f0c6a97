"""E-mail address syntax and normalisation (no DNS look-ups at request time)."""

from __future__ import annotations

from email_validator import EmailNotValidError, validate_email

MAX_LENGTH = 254


def normalize(address: str) -> str:
    """Return the canonical form (domain lower-cased, local part kept) or raise ValueError."""
    if len(address) > MAX_LENGTH:
        raise ValueError(f"email address longer than {MAX_LENGTH} characters")
    if "=?" in address:  # valid atext, but mail readers decode it as an RFC 2047 encoded word
        raise ValueError("an email address must not contain '=?'")
    try:
        result = validate_email(address, check_deliverability=False, allow_smtputf8=True)
    except EmailNotValidError as error:
        raise ValueError(str(error)) from None
    return result.normalized


def contact_key(address: str) -> str:
    """How contacts are matched: the whole address lower-cased."""
    return normalize(address).lower()
