"""One module per verb; each parses into option objects, calls the API and renders.

Nothing below this package prints to the terminal or exits; the commands do,
and `cli.main` maps what escapes them to exit codes once.
"""
