"""What one engine job or one scheduler pass did to automation runs, counted for the
metrics (actors/metrics.count_automation_runs records them): runs started, steps taken by
step type, runs ended by status.

Counted from the writes that landed (every move of a run is a compare-and-set on its
`version`), so a redelivered job or a second worker holding the same run counts nothing
twice."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

from .runs import ENDED_STATUSES


@dataclasses.dataclass
class RunCounts:
    started: int = 0                                               # runs whose first step was taken
    steps: Counter[str] = dataclasses.field(default_factory=Counter)  # step type → steps taken
    ended: Counter[str] = dataclasses.field(default_factory=Counter)  # completed, failed, cancelled → runs

    def count_moves(self, moves: Iterable[tuple[dict, dict]]) -> None:
        """(the run before, the run after) of each move that landed: one step of the type
        its history entry names; a run with no history before was just started (whatever
        started it: a trigger, the API, a move_to_flow step), one that ended, ended."""
        for before, after in moves:
            if not before.get("history"):
                self.started += 1
            self.steps[after["history"][-1]["step_type"]] += 1
            if after["status"] in ENDED_STATUSES:  # moves are of open runs only
                self.ended[after["status"]] += 1

    def count_ended(self, status: str) -> None:
        """A run ended outside a step (the engine cancelled it, or failed it after its errors)."""
        self.ended[status] += 1
