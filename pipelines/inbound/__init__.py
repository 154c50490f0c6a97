"""Inbound mail (issue 36): reading a received message (parsing.py) and judging who sent it
(authentication.py). Pure rules: DNS comes through the resolver a caller hands in."""
