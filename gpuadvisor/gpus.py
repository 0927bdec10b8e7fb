"""GPU names: one canonical name per GPU (the `gpu` column of datasets/gpus.csv, e.g. `T4`,
`A100-40GB`, `H100-80GB`) and one resolver for what people type.

`gpu_matches(text, known)` gives the canonical names `text` stands for, case-insensitively:
- a canonical name itself (`a100-80gb`);
- a family, the name's part before the first dash: `A100` is A100-40GB and A100-80GB, `H100`
  is H100-80GB (a filter takes every member; a lookup of one GPU asks to name one);
- SkyPilot's accelerator names (`A100`, `A100-80GB`, `H100`, `H200`, `B200`, `L4`, `T4`,
  `V100`, `V100-32GB`, `A10G`, `L40S`, ...) are exactly those two forms; its names for GPUs
  the catalog lacks (`B300`, `P4`) match nothing (cloud.skypilot also tells family members
  apart by memory);
- GCP's accelerator types, `nvidia-` and `nvidia-tesla-` before either form
  (`nvidia-tesla-t4`, `nvidia-a100-80gb`, `nvidia-l4`);
- the marketing name with its spaces or dashes, where no name or family matched: `RTX 3090`,
  `rtx-a6000`, `RTX 6000 Ada` and `Titan RTX` are RTX3090, RTXA6000, RTX6000Ada and TitanRTX
  (canonical names of workstation and desktop cards carry no dash, so that `RTX` is not a
  family).

Where the name lives: data about an offering or a trial (catalog, store, spec, Trial) call it
`gpu_type`; the performance model's feature is `gpu`. Both hold canonical names.
"""

from __future__ import annotations

from collections.abc import Iterable

VENDOR_PREFIXES = ("nvidia-tesla-", "nvidia-")


def family(name: str) -> str:
    """A GPU's family, lower-case: 'A100-80GB' -> 'a100'."""
    return name.lower().split("-")[0]


def gpu_matches(text: str, known: Iterable[str]) -> tuple[str, ...]:
    """The names in `known` that `text` stands for (empty when none)."""
    key = text.strip().lower().replace(" ", "-")
    for prefix in VENDOR_PREFIXES:
        key = key.removeprefix(prefix)
    known = tuple(known)
    exact = tuple(name for name in known if name.lower() == key)
    return (exact or tuple(name for name in known if family(name) == key)
            or tuple(name for name in known if _compact(name) == _compact(key)))


def _compact(name: str) -> str:
    return name.lower().replace("-", "")
