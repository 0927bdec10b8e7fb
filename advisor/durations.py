"""Parsing of `--deadline` (90m, 24h, 2d, 1d12h, plain hours) and `--budget` (USD)."""

from __future__ import annotations

import re

DEADLINE_ACCEPTED = "a positive duration such as 90m, 24h, 2d, 1d12h or plain hours (36)"
BUDGET_ACCEPTED = "a positive amount of US dollars such as 500, $1200 or 75.50"

_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse_deadline(text: str) -> float:
    """Seconds in `text`; raises ValueError saying what is accepted."""
    compact = text.strip().lower().replace(" ", "")
    if _NUMBER.fullmatch(compact):
        seconds = float(compact) * 3600.0
    else:
        parts = _PART.findall(compact)
        units = [unit for _, unit in parts]
        spelled = "".join(number + unit for number, unit in parts)
        if not parts or spelled != compact or len(set(units)) != len(units):
            raise ValueError(f"deadline {text!r} is not understood; give {DEADLINE_ACCEPTED}")
        seconds = sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
    if seconds <= 0:
        raise ValueError(f"deadline {text!r} is not positive; give {DEADLINE_ACCEPTED}")
    return seconds


def parse_budget(text: str) -> float:
    """US dollars in `text`; raises ValueError saying what is accepted."""
    compact = text.strip().lower().replace(",", "").replace(" ", "")
    compact = compact.removeprefix("$").removesuffix("usd")
    if not _NUMBER.fullmatch(compact) or float(compact) <= 0:
        raise ValueError(f"budget {text!r} is not understood; give {BUDGET_ACCEPTED}")
    return float(compact)


def format_duration(seconds: float) -> str:
    """Short human form: 45m, 7.5h, 3.2d."""
    if seconds != seconds or seconds == float("inf"):
        return "never"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def format_usd(amount: float) -> str:
    """Short human form: $7.25, $1,200."""
    return f"${amount:,.2f}" if amount < 100 else f"${amount:,.0f}"
