"""DKIM as a receiver checks it: the operator loads `postroom dkim`'s records into the
loopback DNS server, and dkimpy fetches the key from there."""

from __future__ import annotations

import json

import dns.resolver

from tests.support.services import run_postroom


def publish_service_zone(service, dns_server):
    """What the operator does: load `postroom dkim`'s records into the shared domain's zone."""
    published = json.loads(run_postroom(service.env, "dkim", "--json").stdout.strip().splitlines()[-1])
    for record in published:
        dns_server.publish(record)
    return published


def dnsfunc_for(dns_server):
    """A dkimpy `dnsfunc` reading TXT records from the loopback DNS server."""
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers, resolver.port = ["127.0.0.1"], dns_server.port

    def lookup(name, timeout=5):
        answer = resolver.resolve(name.decode(), "TXT")
        return b"".join(answer.rrset[0].strings)
    return lookup
