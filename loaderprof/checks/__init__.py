"""Lifecycle checks: one registry, one module per family, rules shared by compare
and watch."""
