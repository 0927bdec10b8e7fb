"""`advisor recommend`: the cheapest cluster that meets a deadline, or the fastest within a
budget, over every GCP and AWS offering, node count and market. numpy only: no torch, pandas,
scikit-learn or cloud SDK on this path."""

from __future__ import annotations

import warnings
from pathlib import Path

import typer

from advisor.cli.app import app
from advisor.cli.options import ARTIFACT_OPTION, CATALOG_OPTION
from gpuadvisor.cli.output import (
    FORMAT_OPTION_HELP, Format, emit_csv, emit_json, fail, render_table, warn,
)

TABLE_COLUMNS = {
    "rank": "#", "where": "where", "instance_type": "instance", "shape": "GPUs x nodes",
    "market": "market", "throughput": "samples/s", "time": "time P50-P90",
    "cost": "cost P50-P90", "p_deadline": "P(dl)", "provenance": "evidence",
}  # fmt: skip
NUMERIC = ("rank", "throughput", "time", "cost", "time_conf", "cost_conf", "p_deadline")
# On a console narrower than the full table, the first of these layouts that fits: the
# pick's key figures (instance, shape, market, time and cost at confidence, P(dl)) stay;
# evidence, throughput, the P50s and then the provider go first (the region names tell GCP's
# from AWS's). Each: columns dropped, columns replaced by narrower ones, what the note says.
NARROW_LAYOUTS = (
    ((), {}, ""),
    (("provenance",), {}, "evidence"),
    (("provenance", "throughput"), {}, "evidence, samples/s"),
    (("provenance", "throughput"),
     {"time": "time_conf", "cost": "cost_conf", "shape": "shape_short"}, "evidence, samples/s, P50s"),
    (("provenance", "throughput"),
     {"time": "time_conf", "cost": "cost_conf", "shape": "shape_short",
      "where": "region"},
     "evidence, samples/s, P50s, provider"),
    (("provenance", "throughput"),
     {"time": "time_conf", "cost": "cost_conf", "shape": "shape_short", "where": "provider"},
     "evidence, samples/s, P50s, region"),
)


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for value in values or [] for v in value.split(",") if v.strip()]


@app.command("recommend")
def recommend(
    model: str | None = typer.Option(
        None, "--model", "-m", help="zoo model: resnet50, bert_large, gpt2, vit_b16, ..."),
    model_argument: str | None = typer.Argument(None, metavar="MODEL", hidden=True),
    deadline: str | None = typer.Option(
        None, help="finish by: 90m, 24h, 2d, 1d12h, or plain hours"),
    budget: str | None = typer.Option(None, help="spend at most this many USD: 500, $1200"),
    confidence: float = typer.Option(
        0.9, help="probability the plan meets the deadline/budget, between 0 and 1"),
    epochs: float | None = typer.Option(None, help="epochs (default: the model card's)"),
    samples: int | None = typer.Option(None, help="samples per epoch (default: the card's)"),
    steps: int | None = typer.Option(
        None, help="total optimizer steps instead of epochs (samples = steps x global batch)"),
    batch_size: int | None = typer.Option(None, help="per-GPU batch (default: the card's)"),
    precision: str = typer.Option("fp32", help="fp32, amp or bf16"),
    provider: list[str] | None = typer.Option(None, help="only these providers: gcp, aws"),
    region: list[str] | None = typer.Option(
        None, help="only these regions (repeatable or comma-separated)"),
    gpu: list[str] | None = typer.Option(
        None, help="only these GPUs or families: T4, V100, A100-80GB, A100, ..."),
    max_nodes: int = typer.Option(8, help="largest cluster to consider, in nodes"),
    top: int = typer.Option(10, help="plans to show"),
    fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_OPTION_HELP),
    plot: Path | None = typer.Option(None, help="write the time-cost Pareto frontier PNG"),
    explain: bool = typer.Option(
        False, "--explain", help="show scaling, revocation risk and what was cut"),
    artifact: Path | None = ARTIFACT_OPTION,
    catalog: list[Path] | None = CATALOG_OPTION,
) -> None:
    """Recommend the cheapest cluster that meets --deadline, or the fastest within --budget.

    Give --deadline, --budget or both: with a budget the fastest plan within it wins. Spot
    plans carry a Monte Carlo of revocations; times and costs are quoted at --confidence.

    Examples:

      advisor recommend --model resnet50 --deadline 24h

      advisor recommend --model bert_large --budget 300 --provider aws --epochs 1 --format json

      advisor recommend --model resnet50 --deadline 2d --budget 400 --gpu V100,A100 --explain

      advisor recommend --model resnet18 --deadline 6h --precision amp --plot frontier.png
    """
    from advisor.candidates import CandidateError, Filters, enumerate_candidates
    from advisor.durations import parse_budget, parse_deadline
    from advisor.optimizer import Constraints, rank_plans
    from advisor.workload import WorkloadError, build_workload

    model = _model(model, model_argument)
    if deadline is None and budget is None:
        fail("give --deadline (e.g. 24h) or --budget (e.g. 500 USD), or both")
    if not 0 < confidence < 1:
        fail(f"--confidence must lie between 0 and 1 (e.g. 0.9), got {confidence:g}")
    if top < 1:
        fail(f"--top must be at least 1, got {top}")
    try:
        constraints = Constraints(
            deadline_s=parse_deadline(deadline) if deadline is not None else None,
            budget_usd=parse_budget(budget) if budget is not None else None,
            confidence=confidence,
        )
        work = build_workload(_cards(), model, epochs=epochs, samples=samples, steps=steps,
                              batch_size=batch_size, precision=precision)
    except (ValueError, WorkloadError) as error:
        fail(str(error))
    offerings, as_of = _catalog(catalog)
    try:
        candidates = enumerate_candidates(
            offerings, work, Filters(_split(provider), _split(region), _split(gpu), max_nodes))
    except CandidateError as error:
        fail(str(error))
    if not len(candidates):
        fail(_nothing_fits(work, candidates), 1)
    estimator = _artifact(artifact)
    plans = rank_plans(work, candidates, estimator, estimator.lifetime, constraints)

    if plans.pick is None:
        fail(_nothing_meets(plans), 1)
    _report(plans, work, as_of, fmt, top, explain, estimator)
    if plot is not None:
        from advisor.plot import plot_frontier

        try:
            plot_frontier(plans, plot, f"{work.model}: time and cost of every plan")
        except (OSError, RuntimeError) as error:
            fail(f"cannot write the plot {plot}: {error}")


def _model(option: str | None, argument: str | None) -> str:
    """--model, or the model named without it (`advisor recommend resnet50 ...` also works)."""
    if option and argument and option != argument:
        fail(f"two models given, --model {option} and {argument}; give one")
    if not (option or argument):
        fail(f"give the model to train with --model, one of: {', '.join(_cards())}")
    return option or argument


def _nothing_fits(work, candidates) -> str:
    from advisor.workload import GIB

    if candidates.largest_gpu_gb is None:
        return "no offering is left after the filters; widen --provider, --region or --gpu"
    return (f"{work.model} at batch {work.batch_per_gpu} ({work.precision}) needs "
            f"{work.memory_per_gpu_bytes() / GIB:.1f} GiB per GPU and the largest GPU has "
            f"{candidates.largest_gpu_gb:g} GB; try a smaller --batch-size or --precision amp")


def _cards():
    from profiler.cards import load_cards

    try:
        return load_cards()
    except (OSError, ValueError, KeyError) as error:
        fail(f"cannot read the model cards ({error}); restore datasets/model_cards.csv", 1)


def _catalog(files: list[Path] | None):
    from cloud.catalog import CatalogError, StaleCatalogWarning, load_catalog

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StaleCatalogWarning)
        try:
            loaded = load_catalog(files or None)
        except CatalogError as error:
            fail(f"{error}; restore the file or rebuild it with `advisor catalog refresh`")
    for warning in caught:
        warn(str(warning.message))
    if not loaded.offerings:
        fail("the price catalog holds no offering; run `advisor catalog refresh`", 1)
    as_of = min(o.as_of for o in loaded.offerings).isoformat()
    return loaded.as_arrays(), as_of


def _artifact(path: Path | None):
    from advisor.artifact import ArtifactError, load_artifact

    try:
        return load_artifact(path)
    except ArtifactError as error:
        fail(str(error), 2 if path else 1)  # a path the user gave is bad input


def _describe(plans, row: int) -> dict:
    """One plan as plain values, for every output format."""
    p = plans

    def number(name, digits=2):
        return round(float(p[name][row]), digits)

    return {
        "provider": str(p["provider"][row]), "region": str(p["region"][row]),
        "instance_type": str(p["instance_type"][row]), "gpu": str(p["gpu_type"][row]),
        "gpus_per_node": int(p["gpus_per_node"][row]), "nodes": int(p["nodes"][row]),
        "shape": f"{int(p['gpus_per_node'][row])}x{p['gpu_type'][row]} x{int(p['nodes'][row])}",
        "market": "spot" if p["spot"][row] else "on-demand",
        "price_per_node_hour": number("price_per_node_hour", 4),
        "throughput": number("throughput", 1), "throughput_lo": number("throughput_lo", 1),
        "throughput_hi": number("throughput_hi", 1),
        "time_p50_s": number("time_p50", 0), "time_p90_s": number("time_p90", 0),
        "cost_p50": number("cost_p50"), "cost_p90": number("cost_p90"),
        "time_at_confidence_s": number("time_conf", 0), "cost_at_confidence": number("cost_conf"),
        "p_deadline": number("p_deadline", 3) if p.constraints.deadline_s is not None else None,
        "p_budget": number("p_budget", 3) if p.constraints.budget_usd is not None else None,
        "revocations_expected": number("revocations", 2),
        "checkpoint_interval_s": (number("checkpoint_interval_s", 0)
                                  if p["spot"][row] and float(p["checkpoint_interval_s"][row])
                                  < float("inf") else None),
        "provenance": str(p["provenance"][row]),
    }


def _nothing_meets(plans) -> str:
    import numpy as np

    from advisor.durations import format_duration

    c = plans.constraints
    time, cost = plans["time_conf"], plans["cost_conf"]
    want = " and ".join(
        ([f"the {format_duration(c.deadline_s)} deadline"] if c.deadline_s is not None else [])
        + ([f"the {usd(c.budget_usd)} budget"] if c.budget_usd is not None else []))

    def name(row):
        d = _describe(plans, row)
        return (f"{d['provider']} {d['instance_type']} x{d['nodes']} {d['market']} in "
                f"{d['region']} ({format_duration(time[row])}, {usd(cost[row])})")

    finite = np.flatnonzero(np.isfinite(time))
    if not len(finite):
        return f"no plan meets {want}: spot revocations outpace progress on every candidate"
    fastest = finite[np.argmin(time[finite])]
    cheapest = finite[np.argmin(cost[finite])]
    return (f"no plan meets {want} at {c.confidence:.0%} confidence; the fastest is "
            f"{name(fastest)} and the cheapest is {name(cheapest)}")


def _report(plans, work, as_of, fmt, top, explain, estimator) -> None:
    from advisor.durations import format_duration
    from advisor.explain import explanation, render

    rows = [{"rank": rank, **_describe(plans, int(row))}
            for rank, row in enumerate(plans.ranked[:top], 1)]
    pick = rows[0]
    explained = None
    if explain:
        lifetime = estimator.lifetime(pick["provider"], pick["gpu"], pick["region"],
                                      pick["market"] == "spot")
        explained = explanation(plans, lifetime)
    if fmt is Format.json:
        c = plans.constraints
        emit_json({
            "pick": pick, "plans": rows, "workload": work.describe(),
            "constraints": {"deadline_s": c.deadline_s, "budget_usd": c.budget_usd,
                            "confidence": c.confidence},
            "assumptions": _assumptions(),
            "catalog": {"as_of": as_of, "candidates": len(plans.candidates)},
            "artifact": {key: getattr(estimator, "doc", {}).get(key)
                         for key in ("schema_version", "fitted_at")},
            **({"explain": explained} if explained else {}),
        })
        return
    if fmt is Format.csv:
        emit_csv(rows, [key for key in pick if key != "shape"])
        return
    _table(rows, plans, work, as_of, format_duration)
    if explained:
        from rich.console import Console

        Console().print("\n".join(render(explained)), highlight=False, markup=False)


def _table(rows, plans, work, as_of, format_duration) -> None:
    from rich.console import Console

    c = plans.constraints
    goal = " and ".join(
        ([f"deadline {format_duration(c.deadline_s)}"] if c.deadline_s is not None else [])
        + ([f"budget {usd(c.budget_usd)}"] if c.budget_usd is not None else []))
    at = f"{c.confidence:.0%}"
    cells = [{
        "rank": f"*{row['rank']}" if row["rank"] == 1 else str(row["rank"]),
        "where": f"{row['provider']} {row['region']}", "provider": row["provider"],
        "region": row["region"], "shape_short": row["shape"],
        "instance_type": row["instance_type"], "shape": row["shape"], "market": row["market"],
        "throughput": f"{row['throughput']:,.0f}",
        "time": f"{format_duration(row['time_p50_s'])}-{format_duration(row['time_p90_s'])}",
        "cost": f"{usd(row['cost_p50'])}-{usd(row['cost_p90'])}",
        "time_conf": format_duration(row["time_at_confidence_s"]),
        "cost_conf": usd(row["cost_at_confidence"]),
        "p_deadline": "-" if row["p_deadline"] is None else f"{row['p_deadline']:.2f}",
        "provenance": row["provenance"],
    } for row in rows]
    headers = {**TABLE_COLUMNS, "time_conf": f"time@{at}", "cost_conf": f"cost@{at}",
               "provider": "cloud", "region": "region", "shape_short": "GPUs x n"}
    title = (f"{work.model}: {goal} at {at} confidence; "
             f"{len(plans.ranked):,} of {len(plans.candidates):,} plans qualify")
    styles = ["bold green" if row["rank"] == 1 else None for row in rows]
    console = Console()
    for dropped, replaced, left_out in NARROW_LAYOUTS:
        keys = [replaced.get(key, key) for key in TABLE_COLUMNS
                if key not in dropped or key in replaced]
        table = render_table(cells, keys, title=title, headers=headers, right=NUMERIC,
                             compact=True, row_styles=styles)
        unbounded = console.options.update_width(10_000)  # the table's natural width
        if console.measure(table, options=unbounded).maximum <= console.width:
            break
    console.print(table)
    console.print(f"* the pick; prices as of {as_of}", style="bold green")
    if left_out:
        console.print(f"narrow console hides {left_out}; --format json has all", style="dim")


def usd(amount: float) -> str:
    return f"${amount:,.2f}" if amount < 100 else f"${amount:,.0f}"


def _assumptions() -> dict:
    from advisor import optimizer, risk, workload

    return {
        "draws": optimizer.DRAWS, "seed": optimizer.SEED,
        "throughput_interval_coverage": optimizer.INTERVAL_COVERAGE,
        "checkpoint_interval": "Young/Daly sqrt(2 x checkpoint_s x cluster MTBF)",
        "revocation_cost": "recovery_s + startup_s / nodes + work since the last checkpoint",
        "sync": "allreduce (DDP)",
        "optimizer_state_bytes_per_param": workload.OPTIMIZER_STATE_BYTES,
        "memory_reserve_gib": workload.CONTEXT_RESERVE_BYTES / workload.GIB,
        "never_finishes_beyond": f"{risk.MAX_SLOWDOWN:g}x the run without revocations",
    }
