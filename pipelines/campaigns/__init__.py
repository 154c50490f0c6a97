"""Campaign rules: fan-out into parts and the counts a campaign shows."""
