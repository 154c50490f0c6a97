"""The one shape every report parser produces."""

from __future__ import annotations

import dataclasses

PERMANENT, TRANSIENT, UNDETERMINED = "permanent", "transient", "undetermined"


@dataclasses.dataclass(frozen=True)
class Bounce:
    email: str                   # the recipient the report is about
    type: str                    # permanent | transient | undetermined
    source: str                  # dsn | arf | smtp
    kind: str = "bounce"         # bounce | complaint
    smtp_status: str = ""        # enhanced status code, e.g. 5.1.1
    diagnostic_code: str = ""    # the remote server's words
    action: str = ""             # DSN Action: failed | delayed; "" for complaints
    reporting_mta: str = ""
    isp_name: str = ""
    feedback_type: str = ""      # ARF: abuse, fraud, ...

    def replace(self, **changes) -> "Bounce":
        return dataclasses.replace(self, **changes)
