"""The advisor's Python API: `recommend` ranks every cluster of the price catalog for a
workload and returns a `Recommendation` as data. The `advisor recommend` command parses its
arguments, calls this and renders the result. numpy only: no torch, pandas, scikit-learn or
cloud SDK on this path.

Errors are `advisor.errors.AdvisorError`s naming the API's parameters; warnings (a stale
catalog, the workload's own: `Workload.warnings`) are data on the result, never printed.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from advisor.errors import AdvisorError, NoPlanError, ParameterError
from advisor.optimizer import Constraints, Plans
from advisor.reasons import Reason
from gpuadvisor.durations import format_duration, format_usd, parse_budget, parse_deadline
from gpuadvisor.vocab import PREDICTION_INTERVAL_LEVEL, market

# SkyPilot's names of the catalog's GPUs where they differ (`sky show-gpus`).
# Node counts searched unless raised: the plans to score grow with it (64: ~2 s on a 2-core
# machine; 256: ~45 s).
MAX_SEARCH_NODES = 64
SKYPILOT_ACCELERATORS = {"A100-40GB": "A100", "H100-80GB": "H100"}


@dataclass
class Recommendation:
    """Ranked plans for a workload. `plans` are the best `top`, best first, as plain values;
    `ranking` holds the scores of every candidate (advisor.optimizer.Plans)."""

    plans: list[dict]
    workload: object  # advisor.workload.Workload
    ranking: Plans
    as_of: str  # date of the oldest price used
    artifact: dict  # the artifact's schema_version and fitted_at
    lifetimes: dict = field(repr=False)  # (provider, GPU, region) -> spot nodes' NodeLifetime
    warnings: list[str] = field(default_factory=list)
    overheads: dict = field(default_factory=dict, repr=False)  # the pick's, with sources
    step: dict = field(default_factory=dict, repr=False)  # the pick's step by part, seconds
    measured_by: str | None = None  # whose figures a `measured` pick's throughput is

    @property
    def pick(self) -> dict:
        return self.plans[0]

    @property
    def constraints(self) -> Constraints:
        return self.ranking.constraints

    def explain(self) -> dict:
        """How the pick's instance scales, what revocations risk on it, what was cut and why
        (each cut an advisor.reasons.Cut as a dict, with its count)."""
        from advisor.artifact import NodeLifetime
        from advisor.explain import explanation

        pick = self.pick
        lifetime = (self.lifetimes[(pick["provider"], pick["gpu"], pick["region"])]
                    if pick["market"] == "spot"
                    else NodeLifetime("on-demand", 1.0, math.inf,
                                      "on-demand nodes are not revoked"))
        return explanation(self.ranking, lifetime, self.overheads, self.step, self.measured_by)

    def to_dict(self, explain: bool = False) -> dict:
        """What `advisor recommend --format json` prints (with --explain: `explain` too)."""
        c = self.constraints
        return {
            "pick": self.pick, "plans": self.plans, "workload": self.workload.describe(),
            "constraints": {"deadline_s": c.deadline_s, "budget_usd": c.budget_usd,
                            "confidence": c.confidence},
            "assumptions": assumptions(),
            "catalog": {"as_of": self.as_of, "candidates": len(self.ranking.candidates)},
            "artifact": self.artifact,
            **({"explain": self.explain()} if explain else {}),
        }

    def to_skypilot(self) -> dict:
        """The pick as a SkyPilot task fragment (`resources` and `num_nodes`)."""
        pick = self.pick
        gpu = SKYPILOT_ACCELERATORS.get(pick["gpu"], pick["gpu"])
        return {
            "resources": {
                "cloud": pick["provider"], "region": pick["region"],
                "instance_type": pick["instance_type"],
                "accelerators": f"{gpu}:{pick['gpus_per_node']}",
                "use_spot": pick["market"] == "spot",
            },
            "num_nodes": pick["nodes"],
        }


def recommend(
    model: str | None = None,
    *,
    deadline: float | str | None = None,
    budget: float | str | None = None,
    confidence: float = 0.9,
    epochs: float | None = None,
    samples: int | str | None = None,
    steps: int | str | None = None,
    batch_per_gpu: int | None = None,
    precision: str = "fp32",
    global_batch: int | None = None,
    batch_policy: str = "fixed-global",
    channels_last: bool = False,
    optimizer: str | None = None,
    providers: str | Sequence[str] = (),
    regions: str | Sequence[str] = (),
    gpus: str | Sequence[str] = (),
    max_nodes: int = 8,
    artifact: str | Path | None = None,
    catalog: str | Path | Sequence[str | Path] | None = None,
    top: int = 10,
    tokens: float | str | None = None,
    seq_len: int | None = None,
    image_size: int | None = None,
    card: str | Path | None = None,
    market: str | None = None,
    max_gpus: int | None = None,
    max_nodes_limit: int | None = None,
) -> Recommendation:
    """The cheapest cluster that meets `deadline` (seconds, or a string such as "24h"), or the
    fastest within `budget` (USD, or a string such as "$500"); with both, the fastest within
    the budget that meets the deadline. Filters (`providers`, `regions`, `gpus`) take a
    name, a comma-separated string or a list. `artifact` and `catalog` replace the shipped
    fitted model and price catalog. `model` names a card (the zoo's or your own, see
    `profiler card`), at `seq_len` / `image_size` when given; `card` is a card file (JSON)
    to plan with instead; `tokens` (20B, or a number) sets a text model's data. `market`
    ('on-demand' or 'spot') and `max_gpus` (GPUs in all) restrict the plans; `max_nodes`
    above `max_nodes_limit` (default MAX_SEARCH_NODES) is refused (the search grows with
    it). Each plan's `quota` says which quotas of a fresh account it exceeds
    (advisor.quotas). The workload trains `global_batch` samples per optimizer step
    (default: the card's recipe) under `batch_policy` "fixed-global"; "fixed-per-gpu" keeps
    `batch_per_gpu` per GPU instead, and the global batch grows with the cluster. Each
    cluster gets the micro-batch, accumulation steps and memory remedy its GPUs fit that the
    estimator prices fastest. `channels_last`: the job keeps its tensors channels-last
    (NHWC), as tuned recipes do; PyTorch's default NCHW pays cuDNN's transposes around each
    16-bit convolution. `optimizer` (sgd, adamw, adam, lamb, rmsprop; default: the card's
    recipe's) sets the state each GPU holds and each update moves. Raises AdvisorError
    (ParameterError for bad input, NoPlanError when nothing fits or meets the constraints)."""
    from advisor.artifact import ArtifactError, load_artifact
    from advisor.candidates import Filters, enumerate_candidates
    from advisor.features import take
    from advisor.optimizer import rank_plans
    from advisor.quotas import check_restrictions, quota_note, restrict
    from advisor.workload import build_workload

    constraints = _constraints(deadline, budget, confidence)
    check_restrictions(market, max_gpus)
    if top < 1:
        raise ParameterError(f"top must be at least 1, got {top}", "top")
    max_nodes_limit = max_nodes_limit or MAX_SEARCH_NODES
    if max_nodes > max_nodes_limit:
        raise ParameterError(
            f"max_nodes {str(max_nodes)[:20]} is more than max_nodes_limit {max_nodes_limit}: "
            "each node count adds a plan per offering and market to score; lower max_nodes, "
            "or raise max_nodes_limit for a longer search", "max_nodes", "max_nodes_limit")
    cards, model = _cards_with(model, card)
    work = build_workload(cards, model, epochs=epochs, samples=samples, steps=steps,
                          batch_per_gpu=batch_per_gpu, precision=precision, tokens=tokens,
                          seq_len=seq_len, image_size=image_size,
                          global_batch=global_batch, batch_policy=batch_policy,
                          channels_last=channels_last, optimizer=optimizer)
    offerings, as_of, stale = _catalog(catalog)
    notes = [*stale, *work.warnings()]
    filters = Filters(_names(providers, "providers"), _names(regions, "regions"),
                      _names(gpus, "gpus"), max_nodes)
    candidates = enumerate_candidates(offerings, work, filters)
    if not len(candidates):
        raise _nothing_fits(work, candidates)
    candidates = restrict(candidates, market, max_gpus)
    try:
        estimator = load_artifact(artifact)
    except ArtifactError as error:  # a path the user gave is bad input; the shipped one, not
        raise AdvisorError(str(error), "artifact", exit_code=2 if artifact else 1) from None
    candidates, features = fastest_layouts(candidates, work, estimator)
    lifetimes = node_lifetimes(estimator, candidates.spot_markets())
    ranking = rank_plans(work, candidates, features, estimator, lifetimes, constraints)
    if ranking.pick is None:
        from advisor.explain import step as explain_step

        fastest = _fastest(ranking)
        if fastest is not None and (explain_step(pick_step(features, fastest, estimator))
                                    or {}).get("host_bound"):
            raise NoPlanError(_nothing_meets(ranking) + HOST_BOUND_HINT, "global_batch")
        hint = FP32_HINT.get(work.precision)
        raise NoPlanError(_nothing_meets(ranking) + (hint or ""), *(["precision"] if hint else []))
    plans = [{"rank": rank, **describe(ranking, int(row))}
             for rank, row in enumerate(ranking.ranked[:top], 1)]
    for plan, row in zip(plans, ranking.ranked[:top]):
        plan["quota"] = quota_note(plan, int(offerings["vcpus"][ranking["offering"][row]]))
    pick = plans[0]
    sources = estimator.overhead_sources(pick["provider"], pick["gpu"], pick["market"] == "spot")
    step = pick_step(features, ranking.pick, estimator)
    measured_by = estimator.measured_by(take(features, [ranking.pick]))[0]
    return Recommendation(plans, work, ranking, as_of,
                          {key: estimator.doc.get(key) for key in ("schema_version", "fitted_at")},
                          lifetimes, notes, sources, step, measured_by)


def pick_step(features, row: int, estimator) -> dict[str, float]:
    """Seconds of each part of the picked plan's step under the fitted physics
    (advisor.physics.step_parts), the host's dispatch of its kernels (`host`), and what
    cuDNN's NCHW transposes take of its memory-bound work (`transposes`: what the same step
    kept channels-last would not spend)."""
    from advisor import physics
    from advisor.explain import HOST_PART, TRANSPOSES_PART
    from advisor.features import take

    pick = take(features, [row])
    coefficients = estimator.doc["throughput"]["coefficients"]
    parts = physics.step_parts(pick, coefficients)
    channels_last = physics.step_parts({**pick, "channels_last": np.ones(1)}, coefficients)
    return {**{part: float(seconds[0]) for part, seconds in parts.items()},
            HOST_PART: float(physics.host_seconds(pick, coefficients)[0]),
            TRANSPOSES_PART: float(parts["memory"][0] - channels_last["memory"][0])}


def fastest_layouts(candidates, work, estimator):
    """Each cluster's fastest layout by the estimator's throughput, with what its memory
    remedy costs: `remedy_slowdown`, the time it adds over the same cluster training its
    per-GPU share in one plain micro-step (were there memory for it); and its features."""
    from advisor.features import take

    features = candidates.features(work)
    throughput = estimator.predict("throughput", features).value
    keep = candidates.fastest_layouts(throughput)
    candidates, throughput, features = candidates.take(keep), throughput[keep], take(
        features, keep)
    slowdown = np.zeros(len(candidates))
    remedied = np.flatnonzero(candidates["remedy"] != "none")
    if len(remedied):
        plain = candidates.take(remedied)
        share = plain["micro_batch"] * plain["accumulation"]
        plain.columns.update(micro_batch=share, accumulation=np.ones_like(share),
                             checkpointing=np.zeros(len(share), bool),
                             sharded=np.zeros(len(share), bool))
        reference = plain.features(work)  # at the plan's widths (FSDP's 16-bit parameters)
        reference["half_params"] = candidates["sharded"][remedied].astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = (estimator.predict("throughput", reference).value
                     / throughput[remedied] - 1.0)
        slowdown[remedied] = np.maximum(np.nan_to_num(ratio), 0.0)
    candidates.columns["remedy_slowdown"] = slowdown
    return candidates, features


def node_lifetimes(artifact, markets) -> dict:
    """The spot nodes' NodeLifetime of every (provider, GPU, region) market, from the artifact,
    with the AWS Spot Instance Advisor bucket read from the catalog's spot markets."""
    from cloud.catalog import spot_market

    def bucket(provider: str, gpu: str, region: str) -> str | None:
        if provider != "aws":
            return None
        try:
            return spot_market(provider, region, gpu).interruption_bucket
        except (LookupError, FileNotFoundError):
            return None

    return {market: artifact.lifetime(*market, True, bucket(*market)) for market in markets}


def model_cards() -> dict:
    """The model cards the workloads come from (datasets/model_cards.csv)."""
    from gpuadvisor.cards import load_cards

    try:
        return load_cards()
    except (OSError, ValueError, KeyError) as error:
        raise AdvisorError(f"cannot read the model cards ({error}); fix or remove your own "
                           "model_cards.csv, or reinstall gpu-advisor", exit_code=1) from None


def _cards_with(model: str | None, card: str | Path | None) -> tuple[dict, str]:
    """The cards to plan from and the model to plan for: `model` among the cards in use, or
    the card file `card` (which a `model` of another name contradicts)."""
    if card is None:
        if not model:
            raise ParameterError("give model (a zoo model or your own card's name) or card "
                                 "(a card file)", "model", "card")
        return model_cards(), model
    from gpuadvisor.cards import CardError, read_card_file

    try:
        own = read_card_file(Path(card))
    except CardError as error:
        raise ParameterError(str(error)) from None  # names the file, which has the fault
    if model and model != own["model"]:
        raise ParameterError(f"the model asked for, {model}, is not the card file's "
                             f"({own['model']} in {card}); give one of them")
    return {**model_cards(), own["model"]: own}, own["model"]


def rate_decimals(value: float) -> int:
    """The decimals that show a rate to 3 significant digits (2 for 2.61, 0 for 528)."""
    magnitude = math.floor(math.log10(abs(value))) if value and math.isfinite(value) else 0
    return max(0, 2 - magnitude)


def rounded_rate(value: float) -> float:
    """Samples a second to one decimal, and to at least 3 significant digits (an LLM's 2.61
    sequences a second, not 2.6)."""
    return round(value, max(1, rate_decimals(value)))


def describe(plans: Plans, row: int) -> dict:
    """One plan as plain values, as every output format gives it."""
    p = plans

    def number(name, digits=2):
        return round(float(p[name][row]), digits)

    def rate(name):
        return rounded_rate(float(p[name][row]))

    return {
        "provider": str(p["provider"][row]), "region": str(p["region"][row]),
        "instance_type": str(p["instance_type"][row]), "gpu": str(p["gpu_type"][row]),
        "gpus_per_node": int(p["gpus_per_node"][row]), "nodes": int(p["nodes"][row]),
        "shape": f"{int(p['gpus_per_node'][row])}x{p['gpu_type'][row]} x{int(p['nodes'][row])}",
        "market": market(p["spot"][row]),
        "price_per_node_hour": number("price_per_node_hour", 4),
        "throughput": rate("throughput"), "throughput_lo": rate("throughput_lo"),
        "throughput_hi": rate("throughput_hi"),
        "time_p50_s": number("time_p50", 0), "time_p90_s": number("time_p90", 0),
        "cost_p50": number("cost_p50"), "cost_p90": number("cost_p90"),
        "time_at_confidence_s": number("time_conf", 0), "cost_at_confidence": number("cost_conf"),
        "p_deadline": number("p_deadline", 3) if p.constraints.deadline_s is not None else None,
        "p_budget": number("p_budget", 3) if p.constraints.budget_usd is not None else None,
        "startup_s": number("startup_s", 1),
        "revocations_expected": number("revocations", 2),
        "checkpoint_interval_s": (number("checkpoint_interval_s", 0)
                                  if p["spot"][row] and float(p["checkpoint_interval_s"][row])
                                  < float("inf") else None),
        "provenance": str(p["provenance"][row]),
        "micro_batch": int(p["micro_batch"][row]), "accumulation": int(p["accumulation"][row]),
        "global_batch": int(p["global_batch"][row]), "remedy": str(p["remedy"][row]),
        "remedy_slowdown": number("remedy_slowdown", 3),
        "memory_mib": round(float(p["need_mib"][row])),
        "gpu_memory_mib": round(float(p["gpu_memory_mib"][row])),
    }


def assumptions() -> dict:
    from advisor import memory, optimizer, physics, risk

    return {
        "draws": optimizer.DRAWS, "seed": optimizer.SEED,
        "throughput_interval_coverage": PREDICTION_INTERVAL_LEVEL,
        "checkpoint_interval": "Young/Daly sqrt(2 x checkpoint_s x cluster MTBF)",
        "revocation_cost": "the replacement's startup_s + recovery_s (rejoin), the whole "
                           "cluster waiting, + work since the last checkpoint",
        "sync": "allreduce (DDP)",
        "throughput_reference": "NVIDIA's tuned PyTorch containers (DeepLearningExamples: "
                                "DALI, channels-last, fused kernels), the fit's reference "
                                "stack; plain eager PyTorch can run convolution nets well "
                                "below it (datasets/measurements/h200.json)",
        "optimizer_state_bytes_per_param": memory.OPTIMIZER_STATE_BYTES,
        "optimizer_update_bytes_per_param": {name: physics.update_bytes(name)
                                             for name in memory.OPTIMIZER_STATE_BYTES},
        "memory_reserve_mib": memory.CUDA_CONTEXT_MIB + memory.WORKSPACE_MIB,
        "activation_checkpointing_compute": round(memory.CHECKPOINT_COMPUTE_FACTOR, 3),
        "sharding": "FSDP full shard: all-gather twice per micro-step, reduce-scatter per step",
        "never_finishes_beyond": f"{risk.MAX_SLOWDOWN:g}x the run without revocations",
    }


def _constraints(deadline, budget, confidence) -> Constraints:
    if deadline is None and budget is None:
        raise ParameterError("give deadline (e.g. 24h) or budget (e.g. 500 USD), or both",
                             "deadline", "budget")
    if not 0 < confidence < 1:
        raise ParameterError(
            f"confidence must lie between 0 and 1 (e.g. 0.9), got {confidence:g}", "confidence")
    return Constraints(deadline_s=_amount(deadline, "deadline", parse_deadline),
                       budget_usd=_amount(budget, "budget", parse_budget),
                       confidence=confidence)


def _amount(value: float | str | None, name: str, parse) -> float | None:
    """Seconds or USD from a number or the CLI's strings (parse_deadline, parse_budget)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return parse(value)
        except ValueError as error:
            raise ParameterError(str(error), name) from None
    if not (value > 0 and math.isfinite(value)):
        raise ParameterError(f"{name} must be a positive number, got {value!r}", name)
    return float(value)


def _names(values: str | Sequence[str], parameter: str) -> list[str]:
    """A filter's names from a string or list of strings, each possibly comma-separated; a
    filter given with no name in it is refused (it would silently filter nothing)."""
    values = [values] if isinstance(values, str) else values or []
    names = [v.strip() for value in values for v in value.split(",") if v.strip()]
    if values and not names:
        raise ParameterError(f"{parameter} is given but names nothing ({values!r}); name one "
                             "or leave it out", parameter)
    return names


def _catalog(files) -> tuple[dict, str, list[str]]:
    """The catalog's offerings as arrays, the oldest price date, and its warnings."""
    from cloud.catalog import CatalogError, StaleCatalogWarning, load_catalog

    if isinstance(files, (str, Path)):
        files = [files]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StaleCatalogWarning)
        try:
            loaded = load_catalog([Path(f) for f in files] if files else None)
        except CatalogError as error:
            raise ParameterError(f"{error}; restore the file or rebuild it with "
                                 "`advisor catalog refresh`", "catalog") from None
    if not loaded.offerings and files:
        raise ParameterError(f"{', '.join(map(str, files))} holds no offering; give a file "
                             "with rows (`advisor catalog show --format csv` writes one)",
                             "catalog")
    if not loaded.offerings:
        raise AdvisorError("the price catalog holds no offering; run `advisor catalog refresh`",
                           exit_code=1)
    as_of = min(o.as_of for o in loaded.offerings).isoformat()
    return loaded.as_arrays(), as_of, [str(w.message) for w in caught]


def _nothing_fits(work, candidates) -> NoPlanError:
    if candidates.largest_gpu_mib is None and any(
            cut.reason is Reason.PRECISION for cut in candidates.dropped):
        return NoPlanError("no GPU left after the filters has bf16 (it arrived with Ampere); "
                           "use precision amp, or widen providers or regions",
                           "precision", "providers", "regions")
    if candidates.largest_gpu_mib is None:
        return NoPlanError("no offering is left after the filters; widen providers, regions "
                           "or gpus", "providers", "regions", "gpus")
    memory = [cut for cut in candidates.dropped if cut.reason is Reason.MEMORY]
    if not memory:
        return NoPlanError(
            f"every cluster has more GPUs than the global batch of {work.global_batch}; raise "
            "global_batch or lower max_nodes", "global_batch", "max_nodes")
    need = min(cut.need_mib for cut in memory)
    return NoPlanError(
        f"{work.model} ({work.precision}) needs {need:,.0f} MiB per GPU even at micro-batch 1 "
        f"with sharding and checkpointing, and the largest GPU has "
        f"{candidates.largest_gpu_mib:,.0f} MiB; allow more nodes (max_nodes) or use "
        "precision amp", "max_nodes", "precision")


# fp32 is PyTorch's default and ours, and it leaves tensor cores to convolutions (TF32 on
# Ampere and later): a goal it misses, mixed precision may meet.
FP32_HINT = {"fp32": "; in fp32 (the default) matrix products leave the tensor cores idle: "
                     "precision bf16 or amp (autocast to 16 bits) may meet it"}
# Where the fastest plan's GPUs wait on their host's dispatch, neither a faster GPU nor a
# 16-bit precision shortens its step; fewer, larger steps do.
HOST_BOUND_HINT = ("; the fastest plan's GPUs wait on their host dispatching each step's "
                   "kernels, so faster GPUs or 16 bits barely help: a larger --global-batch "
                   "(fewer, larger steps) or a compiled step (torch.compile, CUDA graphs) may meet "
                   "it")


def _fastest(plans: Plans) -> int | None:
    """The row of the candidate with the shortest time at the chosen confidence, if any."""
    time = plans["time_conf"]
    finite = np.flatnonzero(np.isfinite(time))
    return int(finite[np.argmin(time[finite])]) if len(finite) else None


def _nothing_meets(plans: Plans) -> str:
    c = plans.constraints
    time, cost = plans["time_conf"], plans["cost_conf"]
    want = " and ".join(
        ([f"the {format_duration(c.deadline_s)} deadline"] if c.deadline_s is not None else [])
        + ([f"the {format_usd(c.budget_usd)} budget"] if c.budget_usd is not None else []))

    def name(row):
        d = describe(plans, row)
        return (f"{d['provider']} {d['instance_type']} x{d['nodes']} {d['market']} in "
                f"{d['region']} ({format_duration(time[row])}, {format_usd(cost[row])})")

    fastest = _fastest(plans)
    if fastest is None:
        return f"no plan meets {want}: spot revocations outpace progress on every candidate"
    finite = np.flatnonzero(np.isfinite(time))
    cheapest = finite[np.argmin(cost[finite])]
    return (f"no plan meets {want} at {c.confidence:.0%} confidence; the fastest is "
            f"{name(fastest)} and the cheapest is {name(cheapest)}")
