"""Files sent with a transactional email: what is accepted, what type each one is, and how
a message refers to its stored bytes.

An attachment is `{filename, content (base64), content_type?, content_id?}`.

- Limits (docs/email.md, Attachments): at most `MAX_ATTACHMENTS` files and
  `MAX_TOTAL_BYTES` of them, decoded, per message; a filename of at most
  `MAX_FILENAME_BYTES` bytes of UTF-8 with no control, line-break or bidirectional
  characters, no path separator and no `=?` (mail-parser, and other readers, decode an
  encoded word even inside an RFC 2231 name: `=?utf-8?q?a.exe?=` would read `a.exe`).
- The type is read from the bytes first (their magic number, `sniff`): a declared
  `content_type` that says otherwise is refused; without one it is what the bytes say,
  else what the filename's extension says (a type whose magic number is known but absent
  from the bytes is refused), else `application/octet-stream`.
- Programs and scripts are refused: by extension (`BLOCKED_EXTENSIONS`), by declared or
  inferred type (`BLOCKED_TYPES`), and by their first bytes (`BLOCKED_MAGIC`: MZ, ELF,
  Mach-O, Java class, `#!`).

Refusals raise `AttachmentRefused` with the field the caller should fix (`filename`,
`content`, `content_type`, `content_id`); the API turns it into 400 `validation_error`
with the path of that field."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import mimetypes
import re
import unicodedata

MAX_ATTACHMENTS = 20
MAX_TOTAL_BYTES = 10 * 1024 * 1024          # decoded bytes of every file of one message
MAX_FILENAME_BYTES = 255                    # UTF-8
MAX_CONTENT_ID_CHARS = 100

# Windows runs these on a double click (or a script host does); mail filters refuse them.
BLOCKED_EXTENSIONS = frozenset({
    "exe", "dll", "com", "bat", "cmd", "scr", "msi", "msp", "mst", "vbs", "vbe", "js", "jse", "wsf", "wsh",
    "ps1", "psm1", "sh", "bash", "csh", "ksh", "jar", "app", "hta", "cpl", "pif", "lnk", "reg", "scf",
    "gadget", "inf", "sys", "drv", "ocx", "apk", "deb", "rpm", "elf", "run", "command",
})
BLOCKED_TYPES = frozenset({
    "application/x-msdownload", "application/x-msdos-program", "application/x-dosexec",
    "application/vnd.microsoft.portable-executable", "application/x-executable", "application/x-elf",
    "application/x-sharedlib", "application/x-mach-binary", "application/x-ms-installer", "application/x-msi",
    "application/x-ms-shortcut", "application/x-sh", "application/x-shellscript", "application/x-csh",
    "text/x-shellscript", "text/x-sh", "application/x-bat", "application/x-msbatch", "application/bat",
    "application/javascript", "application/x-javascript", "text/javascript", "application/ecmascript",
    "text/ecmascript", "application/java-archive", "application/x-java-archive", "application/x-java-applet",
    "application/java-vm", "application/vbscript", "text/vbscript", "application/x-vbscript",
    "application/x-powershell", "application/hta", "application/x-apple-diskimage",
    "application/vnd.android.package-archive", "application/x-debian-package", "application/x-rpm",
})
BLOCKED_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"MZ", "a Windows program (MZ)"),
    (b"\x7fELF", "a Unix program (ELF)"),
    (b"#!", "a script (#!)"),
    (b"\xca\xfe\xba\xbe", "a Mach-O or Java class file"),
    (b"\xfe\xed\xfa\xce", "a Mach-O program"), (b"\xfe\xed\xfa\xcf", "a Mach-O program"),
    (b"\xce\xfa\xed\xfe", "a Mach-O program"), (b"\xcf\xfa\xed\xfe", "a Mach-O program"),
)

# magic number → the type it proves, and the declared types that agree with it (besides
# itself and application/octet-stream, which says nothing)
_ZIP_FAMILY = ("application/zip", "application/x-zip-compressed", "application/epub+zip",
               "application/vnd.openxmlformats-officedocument.", "application/vnd.oasis.opendocument.",
               "application/vnd.ms-", "application/vnd.apple.", "application/x-zip")
_OLE_FAMILY = ("application/msword", "application/vnd.ms-", "application/x-ole-storage", "application/CDFV2")
MAGIC: tuple[tuple[bytes, int, str, tuple[str, ...]], ...] = (
    (b"%PDF-", 0, "application/pdf", ("application/x-pdf",)),
    (b"\x89PNG\r\n\x1a\n", 0, "image/png", ()),
    (b"\xff\xd8\xff", 0, "image/jpeg", ("image/jpg", "image/pjpeg")),
    (b"GIF87a", 0, "image/gif", ()), (b"GIF89a", 0, "image/gif", ()),
    (b"WEBP", 8, "image/webp", ()),
    (b"II*\x00", 0, "image/tiff", ()), (b"MM\x00*", 0, "image/tiff", ()),
    (b"PK\x03\x04", 0, "application/zip", _ZIP_FAMILY), (b"PK\x05\x06", 0, "application/zip", _ZIP_FAMILY),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", 0, "application/x-ole-storage", _OLE_FAMILY),
    (b"\x1f\x8b", 0, "application/gzip", ("application/x-gzip", "application/x-tar")),
    (b"7z\xbc\xaf\x27\x1c", 0, "application/x-7z-compressed", ()),
    (b"Rar!\x1a\x07", 0, "application/vnd.rar", ("application/x-rar-compressed", "application/x-rar")),
    (b"{\\rtf", 0, "application/rtf", ("text/rtf",)),
    (b"OggS", 0, "audio/ogg", ("video/ogg", "application/ogg")),
    (b"ID3", 0, "audio/mpeg", ("audio/mp3",)),
    (b"fLaC", 0, "audio/flac", ("audio/x-flac",)),
)
_PROVEN_TYPES = frozenset(t for _, _, t, _ in MAGIC) - {"application/x-ole-storage", "application/zip"}
GENERIC = "application/octet-stream"
_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
TYPE_PATTERN = r"^\s*[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\s*$"
CONTENT_ID = re.compile(r"^(?:cid:)?([A-Za-z0-9!#$%&'*+/=?^_`{|}~.@-]{1,100})$")
# Shown or acted on as direction changes: "invoice\u202efdp.exe" reads "invoiceexe.pdf".
_BIDI = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u061c")
# Built-in table only: the system's mime.types differs from one machine to the next.
_BY_EXTENSION = mimetypes.MimeTypes(filenames=())


class AttachmentRefused(ValueError):
    """`field`: the attachment's field at fault."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True)
class AttachmentFile:
    """A checked attachment, decoded: what the message stores about it (`reference`) and its bytes."""
    filename: str
    content_type: str
    content_id: str | None
    data: bytes
    sha256: str

    @property
    def size(self) -> int:
        return len(self.data)

    def reference(self) -> dict:
        return {"filename": self.filename, "content_type": self.content_type, "content_id": self.content_id,
                "sha256": self.sha256, "size": self.size}


def check_filename(name: str) -> str:
    if not name or not name.strip():
        raise AttachmentRefused("filename", "must not be empty")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_FILENAME_BYTES:
        raise AttachmentRefused("filename", f"longer than {MAX_FILENAME_BYTES} bytes (UTF-8)")
    if any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") or ch in _BIDI for ch in name):
        raise AttachmentRefused("filename", "must not contain line breaks, control or direction characters")
    if "/" in name or "\\" in name:
        raise AttachmentRefused("filename", "must be a file name, without / or \\")
    if "=?" in name:  # readers decode an encoded word even there: `=?utf-8?q?a.exe?=` would read a.exe
        raise AttachmentRefused("filename", "must not contain an encoded word (=?…?=)")
    if extension(name) in BLOCKED_EXTENSIONS:
        raise AttachmentRefused("filename", f"programs and scripts (.{extension(name)}) are not sent")
    return name


def extension(name: str) -> str:
    """The last extension, as Windows reads it (trailing dots and spaces dropped), lower-cased."""
    stem = name.rstrip(". ")
    return stem.rpartition(".")[2].lower() if "." in stem else ""


def decode(content: str) -> bytes:
    """Standard base64; line breaks and spaces (as some libraries wrap it) are ignored."""
    try:
        return base64.b64decode("".join(content.split()), validate=True)
    except (binascii.Error, ValueError):
        raise AttachmentRefused("content", "is not valid base64") from None


def sniff(data: bytes) -> str | None:
    """The type the first bytes prove, or None."""
    for magic, offset, kind, _ in MAGIC:
        if data[offset:offset + len(magic)] == magic and (offset == 0 or data[:4] == b"RIFF"):
            return kind
    return None


def _agrees(declared: str, sniffed: str) -> bool:
    if declared in (sniffed, GENERIC):
        return True
    aliases = next(a for _, _, kind, a in MAGIC if kind == sniffed)
    return any(declared == a or (a.endswith((".", "-")) and declared.startswith(a)) for a in aliases)


def content_type_of(filename: str, data: bytes, declared: str | None) -> str:
    """The type the attachment is sent as (see the module docstring), or refused."""
    for magic, what in BLOCKED_MAGIC:
        if data.startswith(magic):
            raise AttachmentRefused("content", f"programs and scripts are not sent: the file is {what}")
    sniffed = sniff(data)
    if declared is not None:
        declared = declared.strip().lower()
        if not _TYPE.fullmatch(declared):
            raise AttachmentRefused("content_type", "must be a MIME type such as application/pdf")
        chosen = declared
        if sniffed and not _agrees(declared, sniffed):
            raise AttachmentRefused("content_type", f"says {declared}, but the bytes are {sniffed}")
        if not sniffed and declared in _PROVEN_TYPES:
            raise AttachmentRefused("content_type", f"says {declared}, but the bytes are not one")
    elif sniffed:
        chosen = sniffed
    else:
        guessed = _BY_EXTENSION.guess_type(filename, strict=False)[0]
        if guessed in _PROVEN_TYPES:
            raise AttachmentRefused("content", f"the name says {guessed}, but the bytes are not one")
        chosen = guessed or GENERIC
    if chosen in BLOCKED_TYPES:
        raise AttachmentRefused("content_type", f"programs and scripts ({chosen}) are not sent")
    return chosen


def content_id_of(value: str | None) -> str | None:
    """The Content-ID (without `cid:` or angle brackets) an inline file is referred to by."""
    if value is None:
        return None
    found = CONTENT_ID.fullmatch(value)
    if not found:
        raise AttachmentRefused("content_id", "must be 1 to 100 characters of letters, digits and "
                                              "!#$%&'*+/=?^_`{|}~.@- (an optional cid: prefix is dropped)")
    return found.group(1)


def checked(filename: str, content: str, content_type: str | None = None,
            content_id: str | None = None) -> AttachmentFile:
    """One attachment, decoded and checked (AttachmentRefused names the field at fault)."""
    check_filename(filename)
    data = decode(content)
    if len(data) > MAX_TOTAL_BYTES:
        raise AttachmentRefused("content", f"larger than {MAX_TOTAL_BYTES // (1024 * 1024)} MB once decoded")
    kind = content_type_of(filename, data, content_type)
    return AttachmentFile(filename, kind, content_id_of(content_id), data, hashlib.sha256(data).hexdigest())


def total_problem(files: list[AttachmentFile]) -> str | None:
    """What is wrong with the files of one message together, or None."""
    if sum(f.size for f in files) > MAX_TOTAL_BYTES:
        return f"the attachments come to more than {MAX_TOTAL_BYTES // (1024 * 1024)} MB once decoded"
    ids = [f.content_id for f in files if f.content_id]
    if len(set(ids)) != len(ids):
        return "two attachments have the same content_id"
    return None


def store_key(workspace_id: str, sha256: str) -> str:
    """The stored bytes' id: one copy per workspace and content, however many messages send it."""
    return f"{workspace_id}:{sha256}"
