"""Policies that choose her next action: llm, utility (offline) and scripted (tests)."""
