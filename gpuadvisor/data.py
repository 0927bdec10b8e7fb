"""Where the data files are: the ones the package ships, and the user's own read first.

The repository keeps the shipped files in `datasets/` (data, not a package: a top-level
`datasets` would shadow Hugging Face's). `gpuadvisor/datasets` links there, so a checkout on
PYTHONPATH and an editable install read the repository's files, and the wheel carries them
inside the installed package. What a user writes (`advisor catalog refresh`, their own model
cards) goes to `user_dir()`; nothing writes into the installed package.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path


def user_dir() -> Path:
    """$GPUADVISOR_HOME, else $XDG_DATA_HOME/gpu-advisor (default ~/.local/share/gpu-advisor)."""
    home = os.environ.get("GPUADVISOR_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec: an unset, empty or relative XDG_DATA_HOME means the default.
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "gpu-advisor"


def shipped(name: str) -> Path:
    """The package's own copy of a data file (`measurements` names a folder); read only.
    A wheel installs as plain files, so the resource is a real path."""
    return Path(files("gpuadvisor").joinpath("datasets", name))


def find(name: str) -> Path:
    """The file to read: the user's copy of that name when there is one, else the shipped."""
    mine = user_dir() / name
    return mine if mine.is_file() else shipped(name)
