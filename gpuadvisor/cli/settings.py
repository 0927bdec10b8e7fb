"""The settings users repeat from command to command, one environment variable each, read by
every option of both apps that takes that setting (typer's `envvar=`)."""

from __future__ import annotations

SETTINGS = ("store", "artifact", "catalog", "results")


def envvar(setting: str) -> str:
    """GPUADVISOR_<SETTING>, the environment variable of one of SETTINGS."""
    if setting not in SETTINGS:
        raise KeyError(f"{setting!r} is not one of the shared settings {SETTINGS}")
    return f"GPUADVISOR_{setting.upper()}"
