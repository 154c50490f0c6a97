"""JSON as we write it where its bytes matter (stored text, signed bodies, size limits)."""

from __future__ import annotations

import json
from typing import Any


def compact(value: Any) -> str:
    """`value` as compact JSON, UTF-8 characters kept as they are; what JSON cannot carry
    (a date read from the store) is written as its `str()`."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
