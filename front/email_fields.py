"""Field types of the transactional send body beyond the basics (front/routes/email.py):
cc/bcc, several reply-to addresses, attachments, the sender's own headers, metadata and
tags. The rules live in pipelines/messages/ (attachments, custom_headers, labels); these
types apply them while the body is validated (a large body: in a parser process,
front/body_parsing.py), so a refusal is a 400 `validation_error` whose `path` names the
field, e.g. `attachments[2].content_type` or `headers.From`."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field, PrivateAttr, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from pipelines.audience.recipients import MAX_RECIPIENTS
from pipelines.messages import attachments as files
from pipelines.messages import custom_headers, labels

from .types import EmailAddress, Strict

MAX_REPLY_TO = 10


def refused(reason: str, at: str = "") -> PydanticCustomError:
    """A validation error whose path goes on past the validated value by `at` (front/validation.py)."""
    return PydanticCustomError("refused", "{reason}", {"reason": reason, "at": at})


def _any_case(word: str) -> str:
    """`word` as a pattern matching it in any case (JSON Schema patterns take no flags)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c.replace(".", "\\.") for c in word)


# What the document says of each field, as far as a schema can (the rest: a 400 with its path)
NO_CONTROLS = "^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029]*$"
_FILENAME_PATTERN = ("^[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\u200e\\u200f\\u202a-\\u202e"
                     "\\u2066-\\u2069\\u061c/\\\\]*$")
_BLOCKED_FILENAME = f"\\.(?:{'|'.join(_any_case(e) for e in sorted(files.BLOCKED_EXTENSIONS))})[. ]*$"
_OWNED_HEADER = ("^(?:" + "|".join(_any_case(n) for n in sorted(custom_headers.OWNED)) + "|"
                 + "|".join(_any_case(p) + ".*" for p in custom_headers.OWNED_PREFIXES) + ")$")
# Standard base64, white space allowed between characters, and not the encoding of a
# program's first bytes (MZ, #!, \x7fEL, Mach-O and Java class magic: attachments.BLOCKED_MAGIC)
_B64 = "\\s*[A-Za-z0-9+/]"
BASE64_PATTERN = (f"^(?!\\s*(?:TV|Iy|f0VM|yv66|/u36|zvrt|z/rt))(?:{_B64 * 4})*"
                  f"(?:{_B64 * 2}\\s*=\\s*=|{_B64 * 3}\\s*=)?\\s*$")
HEADER_NAMES = {"pattern": "^[!-9;-~]{1,76}$", "not": {"pattern": _OWNED_HEADER}}

Recipients = EmailAddress | Annotated[list[EmailAddress], Field(max_length=MAX_RECIPIENTS)]
ReplyTo = EmailAddress | Annotated[list[EmailAddress], Field(min_length=1, max_length=MAX_REPLY_TO)]


class Attachment(Strict):
    """One file: sent as an attachment, or inline (shown in the HTML) with a content_id."""
    filename: Annotated[str, StringConstraints(min_length=1, max_length=files.MAX_FILENAME_BYTES)] = Field(
        json_schema_extra={"pattern": _FILENAME_PATTERN, "not": {"pattern": f"=\\?|{_BLOCKED_FILENAME}"}},
        description="At most 255 bytes of UTF-8; no line breaks, control or direction characters, no / or \\, "
                    "no =? (an encoded word); "
                    "not a program or script (.exe, .js, .sh, …: docs/email.md). Sent RFC 2231-encoded.")
    content: str = Field(json_schema_extra={"contentEncoding": "base64", "pattern": BASE64_PATTERN},
                         description="The file, base64 (line breaks ignored). At most 10 MB decoded, for all "
                                     "files of the message together.")
    content_type: Annotated[str, StringConstraints(max_length=255, pattern=files.TYPE_PATTERN)] | None = Field(
        None, description="MIME type. Checked against the bytes: one they contradict is refused. "
                          "Absent: read from the bytes, then the filename.")
    content_id: Annotated[str, StringConstraints(max_length=files.MAX_CONTENT_ID_CHARS + 4,
                                                 pattern=files.CONTENT_ID.pattern)] | None = Field(
        None, description="Makes the file inline: the HTML shows it as <img src=\"cid:<content_id>\">. "
                          "Letters, digits and !#$%&'*+/=?^_`{|}~.@- (a cid: prefix is dropped).")
    _file: files.AttachmentFile | None = PrivateAttr(None)
    # never stored as given (decoded, and bounded by the 10 MB rule instead of the 1 MB a
    # stored string may have: front/validation.py)
    UNSTORED_FIELDS: ClassVar[frozenset[str]] = frozenset({"content"})

    @model_validator(mode="after")
    def _decoded(self) -> Attachment:
        try:
            self._file = files.checked(self.filename, self.content, self.content_type, self.content_id)
        except files.AttachmentRefused as error:
            raise refused(str(error), error.field) from None
        return self

    @property
    def file(self) -> files.AttachmentFile:
        assert self._file is not None, "validated"
        return self._file


def _together(value: list[Attachment]) -> list[Attachment]:
    problem = files.total_problem([a.file for a in value])
    if problem:
        raise refused(problem)
    return value


Attachments = Annotated[list[Attachment], Field(max_length=files.MAX_ATTACHMENTS), AfterValidator(_together)]


def _headers(value: dict[str, str]) -> dict[str, str]:
    try:
        custom_headers.checked(value)
    except custom_headers.HeaderRefused as error:
        raise refused(str(error), error.name or "") from None
    return value


Headers = Annotated[dict[str, Annotated[str, StringConstraints(max_length=custom_headers.MAX_VALUE_CHARS),
                                        Field(json_schema_extra={"pattern": NO_CONTROLS})]],
                    Field(max_length=custom_headers.MAX_HEADERS, json_schema_extra={"propertyNames": HEADER_NAMES}),
                    AfterValidator(_headers)]
MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=labels.MAX_METADATA_KEY_CHARS,
                                               pattern=labels.METADATA_KEY_PATTERN)]
MetadataValue = Annotated[str, StringConstraints(max_length=labels.MAX_METADATA_VALUE_CHARS)]
Metadata = Annotated[dict[MetadataKey, MetadataValue], Field(
    max_length=labels.MAX_METADATA_PAIRS, json_schema_extra={"propertyNames": {
        "minLength": 1, "maxLength": labels.MAX_METADATA_KEY_CHARS, "pattern": labels.METADATA_KEY_PATTERN}})]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=labels.MAX_TAG_CHARS, pattern=labels.TAG_PATTERN)]
Tags = Annotated[list[Tag], Field(max_length=labels.MAX_TAGS)]
