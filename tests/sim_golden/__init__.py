"""Simulator-level golden outcome tables: every request's ``RequestOutcome`` for small seeded
runs of each engine feature (README.md beside this file)."""
