"""A message from MIME to outcome: headers, DKIM, links, the state table, throttling."""
