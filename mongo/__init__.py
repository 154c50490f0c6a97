"""The one place that talks to the database. Every query is scoped by workspace.

Written to MongoDB's documented behaviour, within a subset the embedded store
(nx-27017) also gets right — see docs/store-notes.md: fields we filter on are always
written (no reliance on missing-vs-null), booleans instead of nulls in filters, no `$not`,
timestamps as ISO strings, counters as flat top-level fields, updates by `_id`."""
