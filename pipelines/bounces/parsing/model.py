"""The one shape every report parser produces."""

from __future__ import annotations

import dataclasses

PERMANENT, TRANSIENT, UNDETERMINED = "permanent", "transient", "undetermined"


@dataclasses.dataclass(frozen=True)
class Bounce:
    email: str                   # the recipient the report is about ("" when a complaint redacts it)
    type: str                    # permanent | transient | undetermined (classify.py)
    source: str                  # dsn | arf | smtp
    kind: str = "bounce"         # bounce | complaint
    category: str = ""           # why (classify.CATEGORIES); "" for complaints
    reason: str = ""             # why, finer (reasons.py: userunknown, blocked, …); "" for complaints
    smtp_status: str = ""        # enhanced status code (5.1.1), else the basic reply code (553)
    diagnostic_code: str = ""    # the remote server's words
    action: str = ""             # DSN Action: failed | delayed; "" for complaints
    reporting_mta: str = ""
    isp_name: str = ""
    feedback_type: str = ""      # ARF: abuse, fraud, virus, not-spam, auth-failure, other
    original_recipient: str = ""  # DSN Original-Recipient, when it names another address

    def replace(self, **changes) -> Bounce:
        return dataclasses.replace(self, **changes)
