"""The neutral lowest room that `advisor`, `profiler` and `cloud` all build on: the shipped data
and its accessor, the shared vocabulary, the measurement store and model cards, and the
command-line helpers both apps use. It imports none of the other rooms."""
