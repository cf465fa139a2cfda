"""The parent side of a trial: start it (template, runner), sample it, assemble it."""
