"""The one duration grammar (`--deadline`, `profiler cleanup --older-than`) and `--budget`.

A duration is one or more number+unit parts, each unit at most once, largest first or not:
`90m`, `24h`, `2d`, `1d12h`, `1.5d`, `45s`; units d, h, m, s; spaces and case are ignored.
A plain number is hours (`36` = 36h).
"""

from __future__ import annotations

import math
import re

DURATION_ACCEPTED = "duration such as 90m, 24h, 2d, 1d12h or plain hours (36)"
BUDGET_ACCEPTED = "a positive amount of US dollars such as 500, $1200 or 75.50"

_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds in `text` (0 or more); raises ValueError naming `what` and the grammar."""
    compact = (text or "").strip().lower().replace(" ", "")
    if _NUMBER.fullmatch(compact):
        return float(compact) * _UNIT_SECONDS["h"]
    parts = _PART.findall(compact)
    units = [unit for _, unit in parts]
    spelled = "".join(number + unit for number, unit in parts)
    if not parts or spelled != compact or len(set(units)) != len(units):
        raise ValueError(f"{what} {text!r} is not understood; give a {DURATION_ACCEPTED}")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def parse_deadline(text: str) -> float:
    """Seconds in `text`, which must be positive; raises ValueError saying what is accepted."""
    seconds = parse_duration(text, "deadline")
    if seconds <= 0:
        raise ValueError(f"deadline {text!r} is not positive; give a positive {DURATION_ACCEPTED}")
    if not math.isfinite(seconds):
        raise ValueError(f"deadline {text[:20]!r}... is beyond any number; give a "
                         f"{DURATION_ACCEPTED}")
    return seconds


def parse_budget(text: str) -> float:
    """US dollars in `text`; raises ValueError saying what is accepted."""
    compact = text.strip().lower().replace(",", "").replace(" ", "")
    compact = compact.removeprefix("$").removesuffix("usd")
    if not _NUMBER.fullmatch(compact) or float(compact) <= 0:
        raise ValueError(f"budget {text!r} is not understood; give {BUDGET_ACCEPTED}")
    if not math.isfinite(float(compact)):
        raise ValueError(f"budget {text[:20]!r}... is beyond any number; give {BUDGET_ACCEPTED}")
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
