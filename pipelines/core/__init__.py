"""What every area shares: ids, clocks, errors, settings, small helpers."""
