"""The I/O the workflows are handed: the SMTP client, outbound HTTP, DNS lookups."""
