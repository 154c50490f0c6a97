"""A real DNS server on loopback (dnslib, UDP and TCP on one port) whose records tests
set: the service's resolver (POSTROOM_DNS_RESOLVER) points at it. It answers TXT, CNAME,
A, AAAA and MX (an MX value is "<preference> <host>")."""

from __future__ import annotations

import threading

from dnslib import AAAA, CNAME, MX, QTYPE, RCODE, RR, TXT, A
from dnslib.server import BaseResolver, DNSLogger, DNSServer

TTL_SECONDS = 5
_TXT_CHUNK = 255  # one TXT character-string holds at most 255 bytes


def _mx(value: str) -> MX:
    preference, _, host = value.partition(" ")
    return MX(host.rstrip(".") + ".", int(preference))


_RDATA = {"CNAME": lambda value: CNAME(value + "."), "A": A, "AAAA": AAAA, "MX": _mx}


def _norm(name: str) -> str:
    return name.lower().rstrip(".")


class RecordTable(BaseResolver):
    def __init__(self):
        self.lock = threading.Lock()
        self.records: dict[tuple[str, str], list[str]] = {}

    def resolve(self, request, handler):
        reply = request.reply()
        name, qtype = _norm(str(request.q.qname)), QTYPE[request.q.qtype]
        with self.lock:
            seen = 0
            while seen < 8:  # follow a CNAME chain as a recursive resolver would
                targets = self.records.get((name, "CNAME"), [])
                if qtype == "CNAME" or not targets:
                    break
                reply.add_answer(RR(name + ".", QTYPE.CNAME, rdata=CNAME(targets[0] + "."), ttl=TTL_SECONDS))
                name, seen = _norm(targets[0]), seen + 1
            for value in self.records.get((name, qtype), []):
                if qtype == "TXT":
                    chunks = [value[i:i + _TXT_CHUNK] for i in range(0, len(value), _TXT_CHUNK)] or [""]
                    reply.add_answer(RR(name + ".", QTYPE.TXT, rdata=TXT(chunks), ttl=TTL_SECONDS))
                elif qtype in _RDATA:
                    reply.add_answer(RR(name + ".", getattr(QTYPE, qtype), rdata=_RDATA[qtype](value),
                                        ttl=TTL_SECONDS))
            known = any(key[0] == name for key in self.records)
        if not reply.rr and not known:
            reply.header.rcode = RCODE.NXDOMAIN
        return reply


class LoopbackDns:
    def __init__(self, port: int):
        self.port = port
        self.table = RecordTable()
        quiet = DNSLogger(log="-request,-reply,-truncated,-error,-recv,-send,-data", prefix=False)
        self.servers = [DNSServer(self.table, address="127.0.0.1", port=port, tcp=tcp, logger=quiet)
                        for tcp in (False, True)]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> LoopbackDns:
        for server in self.servers:
            server.start_thread()
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def set(self, name: str, rtype: str, *values: str) -> None:
        """Replace the records of one name and type (no values: remove them)."""
        with self.table.lock:
            if values:
                self.table.records[(_norm(name), rtype.upper())] = [v.rstrip(".") if rtype.upper() == "CNAME" else v
                                                                    for v in values]
            else:
                self.table.records.pop((_norm(name), rtype.upper()), None)

    def publish(self, record: dict) -> None:
        """Publish a record as the API describes it ({type, name, value})."""
        self.set(record["name"], record["type"], record["value"])
