"""Reporters: each one a pure function of a Report."""
