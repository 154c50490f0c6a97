"""Automation rules: triggers, steps and how a run advances."""
