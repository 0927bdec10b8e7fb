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
  `rtx-a6000` (or `A6000`), `RTX 6000 Ada` and `Titan RTX` are RTX3090, RTXA6000, RTX6000Ada
  and TitanRTX (canonical names of workstation and desktop cards carry no dash, so that `RTX`
  is not a family); a GeForce card by its number alone (`3090`, `2080Ti`, `1080 Ti`) is the
  RTX (GTX before the 20 series) card of that number; `RTX8000` is the Quadro RTX 8000, and
  `RTX 6000`, which may be the Quadro RTX 6000 or the RTX 6000 Ada, names both;
- the device name the driver reports (`torch.cuda.get_device_name()`, `nvidia-smi`), as
  profiled runs and other people's benchmark tables record it: `Tesla V100-SXM2-32GB`,
  `NVIDIA A100-SXM4-40GB`, `NVIDIA H100 80GB HBM3`, `NVIDIA GeForce RTX 3090`. Vendor and
  brand words go; a memory size picks the family member with that memory; a form factor
  (SXM, PCIe, NVL) must be the datasheet row's (gpus.csv `form_factor`), because the PCIe
  part of an SXM GPU runs at a lower power limit and clock: `Tesla V100-PCIE-16GB` is
  V100PCIe and `NVIDIA A100 80GB PCIe` A100PCIe-80GB (rows of their own, named like P100SXM2),
  while `NVIDIA H200 NVL` matches nothing until its own row is added.

Where the name lives: data about an offering or a trial (catalog, store, spec, Trial) call it
`gpu_type`; the performance model's feature is `gpu`. Both hold canonical names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

VENDOR_PREFIXES = ("nvidia-tesla-", "nvidia-")
# Words of a driver's device name that name the vendor or brand, not the GPU ("Quadro" is kept:
# it is part of QuadroRTX8000's name).
BRAND_WORDS = ("nvidia", "tesla", "geforce", "generation")
MEMORY_WORD = re.compile(r"^(\d+)gb$")
FORM_WORDS = {"sxm": "sxm", "sxm2": "sxm", "sxm3": "sxm", "sxm4": "sxm", "sxm5": "sxm",
              "pcie": "pcie", "nvl": "pcie"}  # H100/H200 NVL: PCIe cards bridged in pairs
MEMORY_TYPE = re.compile(r"^(hbm\w*|gddr\w*)$")  # "H100 80GB HBM3": the memory's kind
RTX_A_SERIES = re.compile(r"a\d{4}")  # NVIDIA's Ampere workstation cards, RTX A2000-A6000
# A GeForce card by its number alone, as benchmark tables write it ("3090", "2080Ti", "1080 Ti"):
# GTX before the 20 series, RTX from it on.
GEFORCE_NUMBER = re.compile(r"(\d{2})\d{2}(ti|super)?")
# "RTX 8000", "RTX 6000": Turing's Quadro RTX cards, or the Ada card of that number (RTX 6000 Ada
# Generation), which the bare name does not tell apart: every row it may be.
QUADRO_RTX = re.compile(r"rtx[4-8]000")


def family(name: str) -> str:
    """A GPU's family, lower-case: 'A100-80GB' -> 'a100'."""
    return name.lower().split("-")[0]


def gpu_matches(text: str, known: Iterable[str] | Mapping[str, Any]) -> tuple[str, ...]:
    """The names in `known` that `text` stands for (empty when none). `known` may map names
    to datasheet rows (cloud.gpus.GpuSpec): their `memory_gb` and `form_factor` then tell a
    driver's device name apart."""
    key = text.strip().lower().replace(" ", "-")
    for prefix in VENDOR_PREFIXES:
        key = key.removeprefix(prefix)
    names = tuple(known)
    exact = tuple(name for name in names if name.lower() == key)
    return (exact or tuple(name for name in names if family(name) == key)
            or tuple(name for name in names if _compact(name) == _compact(key))
            or _device_matches(text, known))


def _device_matches(text: str, known: Iterable[str] | Mapping[str, Any]) -> tuple[str, ...]:
    """The names a driver's device name stands for: brand words, memory kind and size and
    form factor set apart, the rest compacted ('Tesla V100-SXM2-32GB': v100, 32 GB, SXM)."""
    # Brackets go too: the driver names the 2016 TITAN X "TITAN X (Pascal)".
    words = _joined_sizes([w for w in re.split(r"[\s_/()-]+", text.strip().lower())
                           if w and w not in BRAND_WORDS and not MEMORY_TYPE.match(w)])
    memory = [int(m.group(1)) for w in words if (m := MEMORY_WORD.match(w))]
    forms = [w for w in words if w in FORM_WORDS]
    core = "".join(w for w in words if not MEMORY_WORD.match(w) and w not in FORM_WORDS)
    if not core:
        return ()
    if RTX_A_SERIES.fullmatch(core):  # 'A6000' is the RTX A6000, as benchmark tables write it
        core = "rtx" + core
    elif number := GEFORCE_NUMBER.fullmatch(core):
        core = ("gtx" if int(number.group(1)) < 20 else "rtx") + core
    names = tuple(known)
    rows = known if isinstance(known, Mapping) else {}
    if QUADRO_RTX.fullmatch(core):  # every card the bare name may be, of the size given
        return tuple(n for n in names if _compact(n) in ("quadro" + core, core + "ada")
                     and (not memory or _memory_gb(n, rows.get(n)) == memory[0]))
    # A form factor that is part of a name (P100SXM2, the DGX-1's P100; A100PCIe-80GB) names
    # that part; otherwise the name without it, whose row's form must then be the one asked.
    found = [n for n in names if forms and _compact(_without_memory(n)) == core + "".join(forms)]
    named_form = bool(found)
    found = found or [n for n in names if _compact(_without_memory(n)) == core]
    if memory:
        found = [n for n in found if _memory_gb(n, rows.get(n)) == memory[0]]
    elif len(found) > 1:  # no size given: the family's own name (V100, not V100-32GB)
        found = [n for n in found if n.lower() == family(n)] or found
    wanted = {FORM_WORDS[w] for w in forms}
    return tuple(n for n in found if named_form or not wanted
                 or form_of(rows.get(n)) in wanted | {None})


def _joined_sizes(words: list[str]) -> list[str]:
    """A memory size written apart from its unit ('80', 'gb') as one word ('80gb')."""
    joined: list[str] = []
    for word in words:
        if word == "gb" and joined and joined[-1].isdigit():
            joined[-1] += word
        else:
            joined.append(word)
    return joined


def other_form_of(text: str, known: Mapping[str, Any]) -> tuple[str, ...]:
    """The rows a device name would match but for its form factor ('NVIDIA H100 PCIe':
    H100-80GB, whose row is the SXM part): what an error names when it matched nothing."""
    words = re.split(r"[\s_/-]+", text.strip().lower())
    if not any(w in FORM_WORDS for w in words):
        return ()
    return _device_matches(" ".join(w for w in words if w not in FORM_WORDS), known)


def _without_memory(name: str) -> str:
    head, _, tail = name.rpartition("-")
    return head if head and MEMORY_WORD.match(tail.lower()) else name


def _memory_gb(name: str, row: Any) -> int | None:
    """A GPU's memory in GB: its name's size (A100-80GB), else its datasheet row's."""
    tail = MEMORY_WORD.match(name.rpartition("-")[2].lower())
    if tail:
        return int(tail.group(1))
    size = getattr(row, "memory_gb", None)
    return round(size) if size else None


def form_of(row: Any) -> str | None:
    """'sxm' or 'pcie' from a datasheet row's form_factor (an NVL card is a PCIe card); None
    where unknown."""
    form = str(getattr(row, "form_factor", None) or "").lower()
    return FORM_WORDS.get(form) or None


def _compact(name: str) -> str:
    return name.lower().replace("-", "")
