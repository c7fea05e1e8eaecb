"""Token usage and cost of one attempt, successful, failed or partial."""

from __future__ import annotations

import attrs


@attrs.frozen(kw_only=True)
class Usage:
    """Tokens one attempt consumed, and its cost when a price is known.

    Usage of failed and partial attempts is recorded too (a cut stream still cost its
    prompt), so budgets and cost reports never under-count retries.
    """

    input_tokens: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    output_tokens: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if self.cost is None and other.cost is None:
            cost = None
        else:
            cost = (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost=cost,
        )
