"""Why a text file the user named cannot be read, in words a one-line error can carry: a
directory, a missing file, a binary or UTF-16 file where UTF-8 text was expected."""

from __future__ import annotations

import codecs
from pathlib import Path

UTF16_MARKS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def unreadable(path: str | Path, error: OSError | UnicodeDecodeError) -> str:
    """`path` and what is wrong with it, for an error raised while opening or decoding it."""
    if isinstance(error, UnicodeDecodeError):
        if error.object[:2] in UTF16_MARKS:
            return f"{path} is UTF-16 text; save it as UTF-8"
        return f"{path} is not UTF-8 text (byte {error.start} is not); give the text file"
    if isinstance(error, IsADirectoryError):
        return f"{path} is a directory; give a file"
    if isinstance(error, FileNotFoundError):
        return f"{path}: no such file"
    return f"cannot read {path}: {error.strerror or error}"
