"""Templates and rendering: merge tags, blocks, personalisation, budgets."""
