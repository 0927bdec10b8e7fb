"""The sizes a sweep takes unless told otherwise (`profiler sweep --max-trials/--max-nodes`):
a grid expands into trials one by one, and every local node is processes on this machine.
Kept apart from profiler.spec so that the command line reads them without pydantic."""

MAX_TRIALS = 1000
MAX_CLOUD_NODES = 32
