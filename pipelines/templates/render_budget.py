"""What rendering one message may cost, so one tenant's template cannot stall everyone's mail.

Three limits, each with its number here:

- nesting: blocks (`{{#if}}`, `{{#unless}}`, `{{#each}}`) nest at most MAX_NESTING_DEPTH deep.
  Static, so refused when the template is saved or sent (pipelines/templates/merge_tags.py);
- loop work: the `{{#each}}` loops of one message (subject, HTML and text together) take at
  most MAX_LOOP_STEPS steps. A step is one iteration, or one tag evaluated inside a loop
  (a value, a block; a name looked up through n enclosing loop items costs n more). A
  loop is charged its whole length when it starts, so a template that would go over
  stops before doing the work. Outside loops each tag runs at most once, bounded by the
  template's own size;
- output: each part stops growing past its limit (the 256 KB body limit). Values are
  charged as they are written, literal text inside loops per iteration (literal text
  outside loops is bounded by the template). The count is in characters before HTML
  escaping, never more than the bytes written, so it stops only what is too large; the
  exact byte size is checked once the part is complete.

A message over a limit fails alone, with the reason as its failure detail."""

from __future__ import annotations

MAX_NESTING_DEPTH = 400
MAX_LOOP_STEPS = 100_000
DEFAULT_MAX_OUTPUT_BYTES = 256 * 1024


class RenderBudgetExceeded(ValueError):
    """A message whose rendering went over a limit: it fails, the others render on."""


class RenderedTooLarge(RenderBudgetExceeded):
    """Rule 8 applies to what is sent: a part that grows past the limit once filled fails."""


class RenderBudget:
    """The budget of one message. `start` begins a part (with its own output limit); the
    loop steps are shared by every part of the message."""

    __slots__ = ("max_steps", "steps_left", "chars_left", "max_bytes", "part")

    def __init__(self, steps: int = MAX_LOOP_STEPS):
        self.max_steps = self.steps_left = steps
        self.start("output", DEFAULT_MAX_OUTPUT_BYTES)

    def start(self, part: str, max_bytes: int) -> RenderBudget:
        self.part, self.max_bytes, self.chars_left = part, max_bytes, max_bytes
        return self

    def spend(self, steps: int, chars: int) -> None:
        """Loop work about to be done: `steps`, and `chars` of literal text it writes."""
        self.steps_left -= steps
        if self.steps_left < 0:
            raise RenderBudgetExceeded(
                f"the template's {{{{#each}}}} loops need more than {self.max_steps:,} steps for this "
                "message (iterations and the tags they evaluate; the limit per message)")
        self.chars_left -= chars
        if self.chars_left < 0:
            self.too_large()

    def too_large(self):
        raise RenderedTooLarge(f"the rendered {self.part} is larger than {self.max_bytes // 1024} KB")
