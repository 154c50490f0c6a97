"""Domain logic as plain code: no web framework, no broker, no database handles."""
