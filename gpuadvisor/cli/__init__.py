"""Command-line conventions shared by the `advisor` and `profiler` apps: one-line errors, output
formats and the one table renderer."""
