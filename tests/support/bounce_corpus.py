"""The real-world bounce samples that ship in flufl.bounce's source distribution (117
messages written by Postfix, Exim, qmail, sendmail, Exchange, Yahoo, AOL, GroupWise,
SMTP32, …), read straight from the sdist that `ops/test.sh` fetches into
`.cache/flufl-bounce-sdist/` — nothing of it is copied into our tree.

Which addresses each sample is about comes from flufl.bounce's own test table
(`DETECTORS` in tests/test_detectors.py of the same sdist: detector, file, expected
addresses, temporary?), read with `ast.literal_eval`; a sample listed more than once
(groupwise_02: [] for GroupWise, one address for Exchange) has the union."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.metadata
import tarfile
from pathlib import Path

P, T, U = "permanent", "transient", "undetermined"

# sample: (format, type, category) of every address it bounces, reviewed sample by sample
# against the notice's own words (pipelines/bounces/parsing/classify.py is the table behind it)
EXPECTED = {
    "aol_01": ("aol", T, "policy"),
    "bounce_02": ("simplematch", P, "address"),
    "bounce_03": ("simplematch", U, "other"),
    "caiwireless_01": ("caiwireless", U, "other"),
    "dsn_01": ("rfc3464", T, "mailbox_full"),
    "dsn_02": ("rfc3464", T, "system"),
    "dsn_03": ("rfc3464", T, "message"),
    "dsn_04": ("rfc3464", T, "mailbox_full"),  # bare 5.0.0; the notice says "disk quota exceeded"
    "dsn_05": ("rfc3464", T, "system"),
    "dsn_06": ("rfc3464", T, "system"),
    "dsn_07": ("rfc3464", T, "system"),
    "dsn_08": ("rfc3464", T, "system"),
    "dsn_09": ("rfc3464", T, "policy"),
    "dsn_10": ("rfc3464", P, "address"),
    "dsn_11": ("rfc3464", P, "address"),
    "dsn_12": ("rfc3464", P, "address"),
    "dsn_13": ("rfc3464", P, "address"),
    "dsn_14": ("rfc3464", P, "address"),
    "dsn_15": ("rfc3464", P, "address"),
    "dsn_16": ("rfc3464", P, "address"),
    "dsn_17": ("rfc3464", T, "mailbox_full"),
    "dsn_18": ("rfc3464", P, "address"),  # bare 5.0.0; the notice says "Domain does not exist"
    "exim_01": ("exim", P, "address"),
    "groupwise_01": ("groupwise", P, "address"),
    "groupwise_02": ("exchange", P, "address"),
    "hotpop_01": ("simplematch", T, "mailbox_full"),
    "llnl_01": ("llnl", P, "address"),
    "microsoft_01": ("exchange", P, "address"),
    "microsoft_02": ("exchange", P, "address"),
    "microsoft_03": ("simplematch", U, "other"),
    "microsoft_04": ("microsoft", P, "address"),
    "netscape_01": ("netscape", T, "system"),
    "newmailru_01": ("simplematch", T, "mailbox_full"),
    "postfix_01": ("postfix", P, "address"),
    "postfix_02": ("postfix", T, "system"),
    "postfix_03": ("postfix", T, "system"),  # "Command died with status 17 … Command output:": a mailer error
    "postfix_04": ("postfix", T, "mailbox_full"),
    "postfix_05": ("postfix", U, "other"),
    "qmail_01": ("qmail", U, "other"),
    "qmail_02": ("qmail", T, "mailbox_full"),
    "qmail_03": ("qmail", P, "address"),
    "qmail_04": ("qmail", P, "address"),
    "qmail_05": ("qmail", P, "address"),
    "qmail_06": ("qmail", T, "mailbox_full"),
    "qmail_07": ("qmail", T, "mailbox_full"),
    "sendmail_01": ("simplematch", T, "system"),
    "simple_01": ("simplematch", T, "mailbox_full"),
    "simple_02": ("simplematch", U, "other"),
    "simple_03": ("simplewarning", T, "system"),
    "simple_04": ("simplematch", P, "address"),
    "simple_05": ("simplematch", P, "address"),
    "simple_06": ("simplematch", P, "address"),
    "simple_07": ("simplematch", T, "mailbox_full"),
    "simple_08": ("simplematch", P, "address"),
    "simple_09": ("simplematch", T, "mailbox_full"),
    "simple_10": ("simplematch", U, "other"),
    "simple_11": ("simplematch", P, "address"),
    "simple_12": ("smtp32", U, "other"),
    "simple_13": ("simplematch", P, "address"),
    "simple_14": ("simplematch", T, "mailbox_full"),
    "simple_15": ("simplematch", P, "address"),
    "simple_16": ("simplematch", U, "other"),
    "simple_17": ("gmail", U, "other"),
    "simple_18": ("simplematch", T, "system"),
    "simple_19": ("simplematch", P, "address"),
    "simple_20": ("simplematch", U, "other"),
    "simple_21": ("simplewarning", T, "system"),
    "simple_22": ("simplewarning", T, "other"),
    "simple_23": ("simplematch", P, "address"),
    "simple_24": ("simplematch", U, "other"),
    "simple_25": ("simplematch", P, "address"),
    "simple_26": ("simplematch", P, "address"),
    "simple_27": ("simplematch", P, "address"),
    "simple_28": ("gmail", T, "other"),
    "simple_29": ("simplematch", P, "address"),
    "simple_30": ("gmail", U, "other"),
    "simple_31": ("gmail", U, "other"),
    "simple_32": ("simplematch", U, "other"),
    "simple_33": ("simplematch", P, "address"),
    "simple_34": ("simplematch", P, "address"),
    "simple_35": ("simplewarning", T, "other"),
    "simple_36": ("simplematch", P, "address"),
    "simple_37": ("simplematch", U, "other"),
    "simple_38": ("simplematch", T, "mailbox_full"),
    "simple_39": ("simplematch", P, "address"),
    "simple_40": ("simplewarning", T, "system"),
    "simple_41": ("simplematch", P, "address"),
    "simple_44": ("simplematch", T, "system"),
    "simple_45": ("simplematch", T, "mailbox_full"),
    "sina_01": ("sina", U, "other"),
    "smtp32_01": ("smtp32", U, "other"),
    "smtp32_02": ("smtp32", U, "other"),
    "smtp32_03": ("smtp32", U, "other"),
    "smtp32_04": ("smtp32", P, "address"),
    "smtp32_05": ("smtp32", U, "other"),
    "smtp32_06": ("smtp32", P, "address"),
    "smtp32_07": ("smtp32", U, "other"),
    "yahoo_01": ("yahoo", T, "system"),
    "yahoo_02": ("yahoo", T, "mailbox_full"),
    "yahoo_03": ("yahoo", T, "address"),
    "yahoo_04": ("yahoo", T, "mailbox_full"),
    "yahoo_05": ("yahoo", T, "address"),
    "yahoo_06": ("yahoo", T, "address"),
    "yahoo_07": ("yahoo", T, "address"),
    "yahoo_08": ("yahoo", T, "address"),
    "yahoo_09": ("yahoo", T, "address"),
    "yahoo_10": ("yahoo", P, "address"),
    "yahoo_11": ("yahoo", P, "address"),
    "yahoo_12": ("simplematch", U, "other"),
    "yahoo_13": ("yahoo", P, "address"),
    "yale_01": ("yale", P, "address"),
}
# where one address of a sample fails otherwise than the rest: (sample, address) → (type, category)
EXPECTED_BY_ADDRESS = {("yahoo_10", "usery@example.com"): (T, "address")}  # "disabled or discontinued": suspended
ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "flufl-bounce-sdist"


@dataclasses.dataclass(frozen=True)
class Sample:
    name: str                   # file name without .txt, e.g. "qmail_01"
    raw: bytes
    addresses: tuple[str, ...]  # what flufl.bounce's table says bounced; () when it names none
    temporary: bool             # a warning (delayed delivery), per that table


def sdist_path() -> Path:
    version = importlib.metadata.version("flufl.bounce")
    path = CACHE / f"flufl_bounce-{version}.tar.gz"
    if not path.exists():
        raise RuntimeError(
            f"the bounce corpus (flufl.bounce {version}'s source distribution) is missing: {path}. "
            f"`bash ops/test.sh` fetches it; by hand: pip download --no-binary :all: --no-deps "
            f"'flufl.bounce=={version}' -d {CACHE}")
    return path


def _expected(test_source: str) -> dict[str, tuple[set[str], bool]]:
    tree = ast.parse(test_source)
    table = next(ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DETECTORS")
    expected: dict[str, tuple[set[str], bool]] = {}
    for _detector, filename, addresses, temporary in table:
        known, was_temporary = expected.get(filename, (set(), False))
        expected[filename] = (known | {a.decode() for a in addresses}, was_temporary or (temporary and bool(addresses)))
    return expected


@functools.cache
def samples() -> list[Sample]:
    with tarfile.open(sdist_path()) as sdist:
        members = {m.name.split("/", 1)[1]: m for m in sdist.getmembers() if m.isfile() and "/" in m.name}
        expected = _expected(sdist.extractfile(members["tests/test_detectors.py"]).read().decode())
        found = []
        for path, member in sorted(members.items()):
            if path.startswith("tests/data/") and path.endswith(".txt"):
                filename = path.rsplit("/", 1)[1]
                addresses, temporary = expected.get(filename, (set(), False))
                found.append(Sample(filename[:-4], sdist.extractfile(member).read(), tuple(sorted(addresses)),
                                    temporary))
    if len(found) < 100:
        raise RuntimeError(f"{sdist_path()} holds {len(found)} samples; expected the ~117 of flufl.bounce")
    return found


def expected_class(name: str, address: str) -> tuple[str, str]:
    """(type, category) the sample's failure of `address` should get."""
    return EXPECTED_BY_ADDRESS.get((name, address.lower())) or EXPECTED[name][1:]


def by_name() -> dict[str, Sample]:
    return {s.name: s for s in samples()}
