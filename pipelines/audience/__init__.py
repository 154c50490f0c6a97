"""Contacts and who a send reaches: addresses, search, CSV, segments, forms."""
