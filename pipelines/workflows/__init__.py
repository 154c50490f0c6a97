"""The use cases: one module per workflow (accept an email, start a campaign, render and
send a chunk, apply a bounce report, unsubscribe, the commands of each resource (`manage_*`),
the scheduler's passes, …; docs/architecture.md lists them by what starts them). Each takes the store, the settings
and a `Publisher` (publisher.py) and makes the decisions; front views, actors and
scheduler jobs are one-call shells over them, and `mongo/` keeps to queries and guarded
writes. Unlike the rest of `pipelines/` (pure rules that import nothing of ours), these
modules may import `mongo/`; nothing in `mongo/` imports them."""
