"""CM-DARE's names: models, GPUs and run directories, parsed by rule.

Run directories of `speed_and_cluster_size/` are named `<model><gpu>[ps<P>]worker<N>` inside a
parent named `<gpu>[ps<P>]`, and the GPU inside the run name is sometimes abbreviated to its
digits (`shakesmall80worker3` under `k80/`, `shakesmall100worker3` under `p100/`). The parent
folder names the GPU without ambiguity, so the run name is matched against that GPU's full or
digits-only token; without a GPU parent only full GPU names from the catalog are accepted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cloud.gpus import gpu_specs
from gpuadvisor.gpus import family, gpu_matches

# Names CM-DARE gives one model in different files. The checkpoint files call T2T's
# `shakeshake_big` "Shake Large" (same parameter count, 26,204,362, as `shakebig`).
_WORD_ALIASES = (("customresnet", "custom"), ("resnet", "res"), ("large", "big"))


def canonical_model(name: str) -> str:
    """One name per CM-DARE model: 'ResNet-15', 'Res15', 'res15' -> 'res15';
    'Custom ResNet 1' -> 'custom1'; 'Shake Large' -> 'shakebig'; 'Shake 64 32d' -> 'shake6432d'."""
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    for word, alias in _WORD_ALIASES:
        key = key.replace(word, alias)
    if not key:
        raise ValueError(f"empty model name {name!r}")
    return key


def _gpu_tokens() -> dict[str, str]:
    """GPU families (gpuadvisor.gpus.family) -> catalog name; a name that is its own family
    wins over the family's other members ('v100' is V100, not V100-32GB)."""
    names = sorted(gpu_specs(), key=lambda name: name.lower() == family(name))
    return {family(name): name for name in names}


def canonical_gpu(token: str) -> str:
    """'k80' / 'K80' -> 'K80' (the name in datasets/gpus.csv)."""
    matches = gpu_matches(token, gpu_specs())
    if len(matches) != 1:
        raise ValueError(f"unknown GPU {token!r}; known: {', '.join(sorted(gpu_specs()))}")
    return matches[0]


@dataclass(frozen=True)
class RunName:
    model: str
    gpu: str | None  # catalog name
    ps_count: int | None
    workers: int | None


_PARENT = re.compile(r"^(?P<gpu>[a-z]+\d+)(?:ps(?P<ps>\d+))?$")


def parse_run_name(name: str, parent: str | None = None) -> RunName:
    """Parse `res15p100ps2worker4`, `shakesmall80worker3` (with parent 'k80'), `res32p100`.

    Raises ValueError naming the expected form when the name does not follow the rule."""
    name_l = name.lower()
    parent_gpu, parent_ps = None, None
    match = _PARENT.match((parent or "").lower())
    if match and match["gpu"] in _gpu_tokens():
        parent_gpu, parent_ps = match["gpu"], match["ps"]
    if parent_gpu:  # the parent's GPU, spelt in full or by its digits only
        gpu_alt = "|".join(re.escape(t) for t in (parent_gpu, re.sub(r"\D", "", parent_gpu)))
    else:
        gpu_alt = "|".join(sorted(map(re.escape, _gpu_tokens()), key=len, reverse=True))
    pattern = re.compile(
        rf"^(?P<model>[a-z][a-z0-9_]*?)(?P<gpu>{gpu_alt})?(?:ps(?P<ps>\d+))?"
        rf"(?:worker(?P<workers>\d+))?$"
    )
    found = pattern.match(name_l)
    # under a <gpu> folder every run names its worker count; elsewhere the GPU must be named
    if not found or not (found["workers"] if parent_gpu else found["gpu"]):
        raise ValueError(
            f"run directory {name!r} is not <model><gpu>[ps<P>][worker<N>] "
            f"(e.g. res15p100ps2worker4, res32k80)"
        )
    gpu = canonical_gpu(parent_gpu if parent_gpu else found["gpu"])
    ps = found["ps"] or parent_ps
    return RunName(
        model=canonical_model(found["model"]),
        gpu=gpu,
        ps_count=int(ps) if ps else None,
        workers=int(found["workers"]) if found["workers"] else None,
    )
