"""Why a delivery failed, as a reason of a fine taxonomy (the one Sisimai, a well-tested
bounce classifier, publishes: userunknown, hostunknown, mailboxfull, blocked, …), read
from the remote server's words and its status code.

Two tables:

- `CODE_REASONS`: what an enhanced status code (RFC 3463, RFC 7372's x.7.2x) says by
  itself. A *strong* code decides alone (5.1.1 is an unknown user whatever the words);
  a vague one (x.0.0, x.2.1, x.7.0, x.7.1, a bare 550/554, none) leaves the words to decide
  (5.2.1 "user unknown" is an unknown user, 5.2.1 "mailbox disabled" a suspended one).
- `PHRASES`: per reason, the phrases mail servers write, tried in the order of the
  table — the sender-side refusals (PTR, SPF/DKIM/DMARC, blocklists, spam, rate limits)
  before the address ones, so "550 Recipient address rejected: Reverse DNS validation
  failed" is a refusal of *our* host, not of the address.

Each reason belongs to one of our categories (classify.CATEGORIES); only the address
reasons (`HARD_REASONS`) ever make a failure permanent."""

from __future__ import annotations

import re

USERUNKNOWN, HOSTUNKNOWN, HASMOVED, NOTACCEPT, SUSPEND = (
    "userunknown", "hostunknown", "hasmoved", "notaccept", "suspend")
MAILBOXFULL, EMAILTOOLARGE, EXCEEDLIMIT, CONTENTERROR, VIRUSDETECTED = (
    "mailboxfull", "emailtoolarge", "exceedlimit", "contenterror", "virusdetected")
BLOCKED, REJECTED, SPAMDETECTED, POLICYVIOLATION, REQUIREPTR, AUTHFAILURE, SECURITYERROR = (
    "blocked", "rejected", "spamdetected", "policyviolation", "requireptr", "authfailure", "securityerror")
NORELAYING, TOOMANYCONN, SPEEDING, BADREPUTATION, NOTCOMPLIANTRFC, FILTERED = (
    "norelaying", "toomanyconn", "speeding", "badreputation", "notcompliantrfc", "filtered")
SYSTEMERROR, SYSTEMFULL, MAILERERROR, NETWORKERROR, EXPIRED, SYNTAXERROR = (
    "systemerror", "systemfull", "mailererror", "networkerror", "expired", "syntaxerror")
ONHOLD, UNDEFINED = "onhold", "undefined"

# the address (or its domain) does not exist or cannot take mail: the only permanent ones
HARD_REASONS = (USERUNKNOWN, HOSTUNKNOWN, HASMOVED, NOTACCEPT)

CATEGORY_OF = {
    **dict.fromkeys((USERUNKNOWN, HOSTUNKNOWN, HASMOVED, NOTACCEPT, SUSPEND), "address"),
    MAILBOXFULL: "mailbox_full",
    **dict.fromkeys((EMAILTOOLARGE, EXCEEDLIMIT, CONTENTERROR, VIRUSDETECTED), "message"),
    **dict.fromkeys((BLOCKED, REJECTED, SPAMDETECTED, POLICYVIOLATION, REQUIREPTR, AUTHFAILURE, SECURITYERROR,
                     NORELAYING, TOOMANYCONN, SPEEDING, BADREPUTATION, NOTCOMPLIANTRFC, FILTERED), "policy"),
    **dict.fromkeys((SYSTEMERROR, SYSTEMFULL, MAILERERROR, NETWORKERROR, EXPIRED, SYNTAXERROR), "system"),
    **dict.fromkeys((ONHOLD, UNDEFINED), "other"),
}

# (subject, detail) of an enhanced code → reason, and whether the code decides alone
CODE_REASONS: dict[tuple[str, str], tuple[str, bool]] = {
    ("1", "0"): (USERUNKNOWN, False), ("1", "1"): (USERUNKNOWN, True), ("1", "2"): (HOSTUNKNOWN, True),
    ("1", "3"): (USERUNKNOWN, True), ("1", "4"): (USERUNKNOWN, False), ("1", "5"): (USERUNKNOWN, False),
    ("1", "6"): (HASMOVED, True), ("1", "7"): (REJECTED, True), ("1", "8"): (REJECTED, True),
    ("1", "9"): (SYSTEMERROR, False), ("1", "10"): (NOTACCEPT, True),
    ("2", "0"): (FILTERED, False), ("2", "1"): (FILTERED, False), ("2", "2"): (MAILBOXFULL, True),
    ("2", "3"): (EMAILTOOLARGE, True), ("2", "4"): (SYSTEMERROR, False),
    ("3", "0"): (SYSTEMERROR, False), ("3", "1"): (SYSTEMFULL, True), ("3", "2"): (NOTACCEPT, False),
    ("3", "3"): (SYSTEMERROR, False), ("3", "4"): (EMAILTOOLARGE, True), ("3", "5"): (SYSTEMERROR, True),
    ("4", "0"): (NETWORKERROR, False), ("4", "1"): (NETWORKERROR, False), ("4", "2"): (NETWORKERROR, False),
    ("4", "3"): (SYSTEMERROR, False), ("4", "4"): (HOSTUNKNOWN, False), ("4", "5"): (SYSTEMERROR, False),
    ("4", "6"): (NETWORKERROR, True), ("4", "7"): (EXPIRED, True),
    ("5", "0"): (SYNTAXERROR, False), ("5", "1"): (SYNTAXERROR, False), ("5", "2"): (SYNTAXERROR, False),
    ("5", "3"): (EXCEEDLIMIT, False), ("5", "4"): (SYNTAXERROR, False), ("5", "6"): (SYNTAXERROR, False),
    ("6", "0"): (CONTENTERROR, False), ("6", "1"): (CONTENTERROR, True), ("6", "2"): (CONTENTERROR, True),
    ("6", "3"): (CONTENTERROR, True), ("6", "4"): (CONTENTERROR, True), ("6", "5"): (CONTENTERROR, True),
    ("7", "0"): (SECURITYERROR, False), ("7", "1"): (REJECTED, False), ("7", "2"): (REJECTED, False),
    ("7", "3"): (SECURITYERROR, False), ("7", "4"): (SECURITYERROR, True), ("7", "5"): (SECURITYERROR, True),
    ("7", "6"): (SECURITYERROR, True), ("7", "7"): (SECURITYERROR, True), ("7", "8"): (AUTHFAILURE, True),
    ("7", "9"): (POLICYVIOLATION, True), ("7", "10"): (SECURITYERROR, True), ("7", "11"): (SECURITYERROR, True),
    ("7", "13"): (SUSPEND, True), ("7", "14"): (SECURITYERROR, True), ("7", "15"): (SECURITYERROR, True),
    ("7", "16"): (SECURITYERROR, True), ("7", "17"): (SUSPEND, True), ("7", "18"): (SUSPEND, True),
    ("7", "20"): (AUTHFAILURE, True), ("7", "21"): (AUTHFAILURE, True), ("7", "22"): (AUTHFAILURE, True),
    ("7", "23"): (AUTHFAILURE, True), ("7", "24"): (AUTHFAILURE, True), ("7", "25"): (REQUIREPTR, True),
    ("7", "26"): (AUTHFAILURE, True), ("7", "27"): (NOTACCEPT, True), ("7", "28"): (SPAMDETECTED, True),
    ("7", "29"): (AUTHFAILURE, True), ("7", "30"): (SECURITYERROR, True), ("7", "509"): (AUTHFAILURE, True),
    ("7", "510"): (SECURITYERROR, True), ("7", "606"): (BLOCKED, True), ("7", "708"): (BLOCKED, True),
}
# basic reply codes (no enhanced one given), when the words say nothing
BASIC_REASONS = {"421": SYSTEMERROR, "450": SYSTEMERROR, "451": SYSTEMERROR, "452": MAILBOXFULL,
                 "500": SYNTAXERROR, "501": SYNTAXERROR, "502": SYNTAXERROR, "503": SYNTAXERROR,
                 "504": SYNTAXERROR, "521": NOTACCEPT, "523": EMAILTOOLARGE, "525": SUSPEND, "530": SECURITYERROR,
                 "551": USERUNKNOWN, "552": MAILBOXFULL, "553": USERUNKNOWN, "556": NOTACCEPT}

# reason → phrases (lower case), tried in this order: sender-side refusals first
PHRASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (ONHOLD, ("on hold", "onhold")),  # the receiver itself cannot tell yet
    # Google Groups: the group refuses the post (not a member, or no such group): a refusal of us
    (REJECTED, ("permission to post", "google groups", "googlegroups")),
    # EZweb (au) answers a recipient's own filter with an address-less "550 : User unknown"
    # (the unknown address itself it names: "550 <bob@ezweb.ne.jp>: User unknown")
    (FILTERED, ("550 : user unknown",)),
    # the domain's name servers answer nonsense for its MX (AOL: 5.4.4 "Malformed or unexpected
    # name server reply"): the domain takes no mail, before "malformed" reads as the message's fault
    (HOSTUNKNOWN, ("unexpected name server reply",)),
    # cPanel's Exim, when the lookup of the recipient's domain fails: "The account or domain
    # may not exist, they may be blacklisted, or missing the proper dns entries"
    (HOSTUNKNOWN, ("account or domain may not exist",)),
    # Microsoft 365's answer for a recipient its directory does not know
    (USERUNKNOWN, ("recipient address rejected: access denied",)),
    (REQUIREPTR, ("reverse dns", "ptr record", "(ptr)", "no ptr", "rdns", "reverse lookup", "reverse hostname",
                  "no reverse", "cannot find your hostname", "client host rejected: cannot find your",
                  "cannot resolve your address", "resolve ptr", "ip name lookup failed", "not resolve to a",
                  "no dns name for your", "hostname you gave", "reverse-resolve", "does not have a pointer",
                  "unverifyable", "unverifiable")),
    (AUTHFAILURE, ("dmarc", "spf", "dkim", "sender policy framework", "authenticat email", "unauthenticated email",
                   "domain-based message authentication", "not authorized to send", "is not permitted to send",
                   "sender domain authentication")),
    (VIRUSDETECTED, ("virus", "malware", "infected", "trojan", "harmful attachment", "mime attachment")),
    (SPAMDETECTED, ("spam", "unsolicited", "junk mail", "bulk mail", "message content rejected", "content filter",
                    "identified as", "classified as", "likely to be", "message filtered", "suspicious",
                    "scored too high", "blocked by our content", "x-spam", "rejected as bulk")),
    (BADREPUTATION, ("reputation", "poor reputation", "low reputation", "ip is not trusted", "sender score")),
    (BLOCKED, ("blacklist", "black list", "blocklist", "block list", "blocked using", "rbl", "dnsbl",
               "spamhaus", "spamcop", "sorbs", "barracuda", "banned", "your ip", "your host", "client host",
               "connection refused by", "has been blocked", "have been blocked", "are blocked", "is blocked",
               "temporarily blocked", "blocked for", "not accepting mail from", "messages from",
               "refused mail from", "not accepting connections", "invalid ip",
               "refused to talk to me",  # Postfix: the greeting refused us ("delivery temporarily suspended")
               "too many unwanted", "sender ip", "server ip", "dynamic ip", "dial-up",
               "dialup", "residential", "your network", "not allowed to connect", "open proxy", "is listed",
               "are listed", "listed at", "listed on", "blocked")),
    (TOOMANYCONN, ("too many recipients", "too many rcpt", "too many connections", "too many concurrent",
                   "too many simultaneous", "connection limit", "too many smtp sessions", "too many sessions")),
    (SPEEDING, ("rate limit", "ratelimit", "too many messages", "sending rate", "throttl",
                "please slow down", "too fast", "try again later (ratelimit")),
    # Amazon SES refusing a sender identity it has not verified: we may not send through it
    # never "relay" alone: it is in host names (relay.example.com) a notice quotes
    (NORELAYING, ("address is not verified", "relay access denied", "relay denied", "relay not permitted",
                  "relay not allowed", "relay prohibited", "unable to relay", "cannot relay", "can't relay",
                  "not permitted to relay", "relaying", "not a gateway", "not local host", "no relay",
                  "we do not relay", "to relay mail", "relay quota")),
    (POLICYVIOLATION, ("policy", "prohibited", "not permitted", "not allowed", "protocol violation")),
    (REJECTED, ("sender address rejected", "unroutable sender", "sender rejected", "sender denied", "domain of sender",
                "sender domain", "sender verify failed", "bad sender", "invalid sender", "sender is not",
                "mail rejected", "not accepting mail", "we don't accept", "access denied",
                "all recipient addresses rejected")),
    (SECURITYERROR, ("starttls", "tls", "ssl", "certificate", "security", "encryption", "authentication required",
                     "must authenticate", "authentication is required", "insecure")),
    (MAILBOXFULL, ("mailbox full", "mailbox is full", "over quota", "overquota", "quota exceeded", "exceeded storage",
                   "exceeds quota", "disk quota", "insufficient storage", "quota", "mailbox size limit",
                   "not enough space", "out of storage", "mailbox is over", "is full", "mailbox exceeded",
                   "too many messages in", "mailfolder is full", "storage limit", "space is full",
                   "mailbox exceeds", "exceeds allowed size", "mailbox size", "no space left")),
    (EMAILTOOLARGE, ("too large", "too big", "size limit", "message size", "exceeds the maximum", "message length",
                     "exceeds size", "maximum message size", "size exceeds", "message is larger",
                     "exceeded the maximum", "line limit exceeded")),
    (EXCEEDLIMIT, ("recipient limit", "recipients exceeded")),
    (CONTENTERROR, ("content error", "invalid header", "header error", "malformed", "mime", "attachment",
                   "8-bit", "8bit", "line too long", "bare lf", "improper")),
    (SUSPEND, ("disabled", "suspended", "deactivated", "inactive", "not active", "no longer active",
               "account closed", "mailbox closed", "is closed", "has been locked", "is locked", "frozen",
               "expired account", "account expired", "blocked account")),
    (HASMOVED, ("has moved", "has been moved", "address changed", "no longer valid", "moved to")),
    # a DNS answer that may change: the network, not a missing domain
    (NETWORKERROR, ("host not found, try again", "temporary failure in name resolution", "try again later: dns")),
    (HOSTUNKNOWN, ("host unknown", "unknown host", "host not found", "no such domain", "domain not found",
                   "domain does not exist", "unrouteable mail domain", "name or service not known",
                   "unknown domain", "domain unknown", "no mx", "mx record", "dns lookup failure", "dns error",
                   "non-existent domain", "nxdomain", "name server", "cannot route", "unable to route",
                   "not our domain", "domain is not hosted", "hostname lookup", "invalid domain",
                   "domain name not found", "host or domain name not found",
                   # Outlook.com: "… because the domain is not reachable. Please check the domain"
                   "domain is not reachable")),
    (NOTACCEPT, ("not accepting network messages", "does not accept mail", "not accept any mail", "null mx", "nullmx",
                 "accepts no mail", "not accepting any mail")),
    (USERUNKNOWN, ("user unknown", "unknown user", "does not exist", "doesn't exist", "no such user",
                   "no such mailbox", "no such recipient", "mailbox unavailable", "mailbox not found",
                   "recipient not found", "recipientnotfound", "recipnotfound", "invalid recipient",
                   "invalid mailbox", "invalid address", "unknown recipient",
                   "unknown or illegal", "no mailbox here", "not a valid mailbox", "unrouteable address",
                   "user not found", "address unknown", "unknown address", "unknown local part", "not our customer",
                   "addressee unknown", "name is not recognized", "not listed in", "bad destination",
                   "mailbox does not", "account does not", "user doesn't", "not a known user", "unknown mailbox",
                   "no valid recipients", "user not known", "no matches to", "did not exactly match",
                   "n'existe pas", "not found", "invalid recipient",
                   "recipient unknown", "no account", "no mailbox", "bad address", "address error",
                   "mailbox unknown", "no such address", "address does not", "not a valid recipient",
                   "unknown account", "doesn't have a", "is not a valid", "invalid-recipient")),
    (EXPIRED, ("retry time", "retry timeout", "giving up", "gave up", "could not deliver for", "expired",
               "too long", "delivery time", "queue time", "maximum time", "not yet been delivered",
               "timeout exceeded", "message timed out")),
    (NETWORKERROR, ("timed out", "timeout", "connection refused", "requests to connect", "socket error",
                    "no route to host", "network is unreachable", "unreachable", "not reachable", "not responding",
                    "connection reset", "lost connection", "name service error", "too many hops", "loop")),
    # a local delivery program (procmail, a pipe) failed: Postfix's "Command output:", "x-unix"
    (MAILERERROR, ("mailer error", "mailer failed", "command output", "procmail", "x-unix", "pipe to |",
                   "delivery program", "mail program", "exited abnormally", "command died", "command failed")),
    (SYSTEMFULL, ("system full", "disk full", "out of disk", "insufficient system storage")),
    (SYSTEMERROR, ("system error", "internal error", "server error", "system config", "temporarily",
                   "temporary failure", "try again", "service unavailable", "service currently unavailable",
                   "local error", "deferred", "mail system", "i/o error", "system")),
    (SYNTAXERROR, ("syntax error", "command unrecognized", "unrecognized command", "bad sequence")),
)
# words that outrank even a strong code: Facebook answers "550 5.1.1 RCP-P2 … Refused due to
# recipient preferences" for an address that exists but whose owner's settings refuse us
OUTRANKING_PHRASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (FILTERED, ("recipient preferences", "recipient's preferences")),
)
_PATTERNS = [(reason, re.compile(r"(?<![a-z0-9])(?:" + "|".join(map(re.escape, words)) + ")"))
             for reason, words in PHRASES]


_NOT_WORDS = re.compile(r"\S+@\S+|\S*://\S+")


def _lowered(text: str) -> str:
    # addresses and links are no words: a local part (`blocked@…`) or a URL's path is no reason
    return " ".join(_NOT_WORDS.sub(" ", (text or "").lower()).split())


def reason_from_words(text: str) -> str | None:
    lowered = _lowered(text)
    return next((reason for reason, pattern in _PATTERNS if pattern.search(lowered)), None)


def outranking_reason(text: str) -> str | None:
    """A reason the words give that no status code overrides (OUTRANKING_PHRASES)."""
    lowered = _lowered(text)
    return next((reason for reason, words in OUTRANKING_PHRASES if any(w in lowered for w in words)), None)


def reason_from_code(code: str) -> tuple[str | None, bool]:
    """(reason, strong): what `code` (`5.1.1` or `550`) says by itself."""
    if "." in code:
        _, subject, detail = code.split(".")
        return CODE_REASONS.get((subject, detail), (None, False))
    return BASIC_REASONS.get(code), False
