"""Errors of the advisor's Python API, as data: what went wrong, which parameters are at fault
(spelled as the API spells them, e.g. `max_nodes`), and the exit status a command line gives
it. The CLIs word the parameters as their flags."""

from __future__ import annotations

from gpuadvisor.errors import GpuAdvisorError


class AdvisorError(GpuAdvisorError):
    """Input the advisor cannot use; the message names the problem and the fix."""

    exit_code = 2  # bad input


class ParameterError(AdvisorError, ValueError):
    """A parameter's value is out of range or contradicts another's."""


class NoPlanError(AdvisorError):
    """Nothing fits or meets the constraints: a valid question without an answer."""

    exit_code = 1
