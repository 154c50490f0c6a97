"""Inbound mail to workspaces (issue 36): the addresses a workspace receives at, the
route patterns that pick a receiver, the SMTP flood budget and the `email.received`
event. Parsing and authentication of the message itself: pipelines/inbound/."""
