"""Sending domains: the DNS records a workspace publishes and how they are checked."""
