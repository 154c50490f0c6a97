"""Webhook rules: event payloads, signatures and the retry schedule."""
