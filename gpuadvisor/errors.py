"""The errors every room's Python API raises, as data: what went wrong, which of the API's
parameters are at fault (spelled as the API spells them, e.g. `max_cost`, never as a flag),
and the exit status a command line gives it. The CLIs word the parameters as their flags
(gpuadvisor.cli.output.flag_words). Imports nothing, so that every room may derive from it."""

from __future__ import annotations


class GpuAdvisorError(Exception):
    """Input or a state the library cannot work with; the message names the problem and the
    fix, and `parameters` the API parameters it is about (none when it is about none)."""

    exit_code = 1

    def __init__(self, message: str, *parameters: str, exit_code: int | None = None):
        super().__init__(message)
        self.parameters = parameters
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def parameter(self) -> str | None:
        """The first parameter at fault, if any."""
        return self.parameters[0] if self.parameters else None

    def __reduce__(self):
        # Raised in a worker process (parallel folds, cards traced on every core), an error
        # comes back pickled. Exception's default calls the class with its message again,
        # which a subclass with an __init__ of its own refuses (StoreWriteError: a TypeError
        # in the caller in place of the error).
        return _restore, (type(self), self.args, self.__dict__)


def _restore(cls: type, args: tuple, state: dict) -> GpuAdvisorError:
    """An unpickled GpuAdvisorError: its class, message and attributes, no __init__ rerun."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error
