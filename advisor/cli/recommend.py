"""`advisor recommend`: the cheapest cluster that meets a deadline, or the fastest within a
budget, over every GCP and AWS offering, node count and market. numpy only: no torch, pandas,
scikit-learn or cloud SDK on this path."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer

from advisor.cli.app import app
from advisor.cli.options import ARTIFACT_OPTION, CATALOG_OPTION
from advisor.memory import OPTIMIZER_STATE_BYTES, recipe_defaults
from advisor.reasons import Reason
from gpuadvisor.cli.output import emit_csv, emit_json, fail, fail_with, render_table, warn
from gpuadvisor.durations import format_usd
from gpuadvisor.vocab import PRECISIONS


class RecommendFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    skypilot = "skypilot"


# The flag of each API parameter whose name differs from it.
FLAGS = {"providers": "provider", "regions": "region", "gpus": "gpu",
         "batch_per_gpu": "batch-size"}
CUT_WORDS = {
    Reason.PROVIDER_FILTER: "provider filter", Reason.REGION_FILTER: "region filter",
    Reason.GPU_FILTER: "GPU filter", Reason.NO_THROUGHPUT: "no throughput prediction",
    Reason.MARKET_FILTER: "market filter", Reason.MAX_GPUS: "more GPUs than --max-gpus",
    Reason.NEVER_FINISHES: "never finishes (revocations outpace progress)",
    Reason.MISSES_DEADLINE: "misses the deadline", Reason.OVER_BUDGET: "over budget",
    Reason.BATCH_BELOW_GPUS: "more GPUs than the global batch has samples",
}

TABLE_COLUMNS = {
    "rank": "#", "where": "where", "instance_type": "instance", "shape": "GPUs x nodes",
    "market": "market", "batch": "micro x acc", "remedy": "memory remedy",
    "throughput": "samples/s", "time": "time P50-P90",
    "cost": "cost P50-P90", "p_deadline": "P(dl)", "provenance": "evidence",
}  # fmt: skip
NUMERIC = ("rank", "throughput", "time", "cost", "time_conf", "cost_conf", "p_deadline")
# On a console narrower than the full table, the first of these layouts that fits: the
# pick's key figures (instance, shape, market, time and cost at confidence, P(dl)) stay;
# evidence, the remedy's cost (its word moves into the batch column), throughput, the P50s and
# then the provider go first (the region names tell GCP's from AWS's). Each: columns dropped,
# columns replaced by narrower ones, what the note says.
NARROW_LAYOUTS = (
    ((), {}, ""),
    (("provenance",), {}, "evidence"),
    (("provenance", "remedy"), {"batch": "batch_short"}, "evidence, remedy cost"),
    (("provenance", "throughput"), {}, "evidence, samples/s"),
    (("provenance", "throughput", "remedy"), {"batch": "batch_short"},
     "evidence, samples/s"),
    (("provenance", "throughput", "remedy"),
     {"time": "time_conf", "cost": "cost_conf", "shape": "shape_short", "batch": "batch_short"},
     "evidence, samples/s, P50s"),
    (("provenance", "throughput", "remedy"),
     {"time": "time_conf", "cost": "cost_conf", "shape": "shape_short", "batch": "batch_short",
      "where": "region"},
     "evidence, samples/s, P50s, provider"),
    (("provenance", "throughput", "remedy"),
     {"time": "time_conf", "cost": "cost_conf", "shape": "shape_short", "batch": "batch_short",
      "where": "provider"},
     "evidence, samples/s, P50s, region"),
    (("provenance", "throughput", "remedy", "where"),  # the instance's name tells the cloud
     {"time": "time_conf", "cost": "cost_conf", "shape": "shape_short", "batch": "batch_short"},
     "evidence, samples/s, P50s, where"),
)
# The remedy's word in the narrow batch column (accumulation shows as the x<steps>; its
# cost, like the other hidden figures, is in --format json).
SHORT_REMEDY = {"none": "", "accumulation": "", "checkpointing": " ckpt", "fsdp": " fsdp",
                "fsdp+checkpointing": " fsdp+ckpt"}


@app.command("recommend")
def recommend(
    model: str | None = typer.Option(
        None, "--model", "-m", help="zoo model (resnet50, bert_large, gpt2, llama_8b, ...) "
        "or your own card's name (`profiler card --config ... --save`)"),
    model_argument: str | None = typer.Argument(None, metavar="MODEL", hidden=True),
    deadline: str | None = typer.Option(
        None, help="finish by: 90m, 24h, 2d, 1d12h, or plain hours"),
    budget: str | None = typer.Option(None, help="spend at most this many USD: 500, $1200"),
    confidence: float = typer.Option(
        0.9, help="probability the plan meets the deadline/budget, between 0 and 1"),
    epochs: float | None = typer.Option(None, help="epochs (default: the model card's)"),
    samples: str | None = typer.Option(
        None, help="samples per epoch: 1281167, 1.28M, 50k (default: the card's)"),
    steps: str | None = typer.Option(
        None, help="optimizer steps of the global batch instead of epochs: 90000, 90k "
        "(samples = steps x global batch, whatever the cluster)"),
    tokens: str | None = typer.Option(
        None, help="text models: tokens to train on instead of epochs: 20B, 1.5T, 500M"),
    seq_len: int | None = typer.Option(
        None, "--seq-len", help="text models: tokens a sequence (default: the card's; "
        "`profiler card MODEL --seq-len N --save` makes the card of another)"),
    image_size: int | None = typer.Option(
        None, "--image-size", help="image models: pixels a side (default: the card's)"),
    card: Path | None = typer.Option(
        None, "--card", help="plan for the model of this card file (`profiler card ... "
        "--out FILE`) instead of --model"),
    global_batch: int | None = typer.Option(
        None, help="samples per optimizer step (default: the model card's recipe)"),
    batch_policy: str = typer.Option(
        "fixed-global", help="fixed-global: keep the global batch, each cluster gets the "
        "micro-batch and accumulation that fit; fixed-per-gpu: keep --batch-size per GPU, the "
        "global batch grows with the GPUs (convergence changes)"),
    channels_last: bool = typer.Option(
        False, "--channels-last", help="the job keeps its tensors channels-last "
        "(`model.to(memory_format=torch.channels_last)`), as tuned recipes do; without it, "
        "PyTorch's default NCHW, cuDNN transposes around each 16-bit convolution"),
    optimizer: str | None = typer.Option(
        None, help=f"what the job steps: {' | '.join(OPTIMIZER_STATE_BYTES)} (default: the "
        f"card's recipe's: {recipe_defaults()}); its state is held on every GPU (or sharded "
        "under FSDP) and read and written by every update"),
    batch_per_gpu: int | None = typer.Option(
        None, "--batch-size", help="per-GPU batch under fixed-per-gpu (default: the card's); "
        "the largest micro-batch under fixed-global"),
    precision: str = typer.Option(
        "fp32", help=f"{' | '.join(PRECISIONS)}: fp32 is PyTorch's default (FP32 matrix "
        "products, TF32 convolutions from Ampere on), tf32 runs matrix products in TF32 too, "
        "amp and bf16 autocast to 16 bits (bf16 from Ampere on)"),
    provider: list[str] | None = typer.Option(None, help="only these providers: gcp, aws"),
    region: list[str] | None = typer.Option(
        None, help="only these regions (repeatable or comma-separated)"),
    gpu: list[str] | None = typer.Option(
        None, help="only these GPUs or families: T4, V100, A100-80GB, A100, ..."),
    max_nodes: int = typer.Option(8, help="largest cluster to consider, in nodes"),
    max_nodes_limit: int | None = typer.Option(
        None, "--max-nodes-limit", min=1, help="allow --max-nodes above 64 (a longer search)"),
    market: str | None = typer.Option(None, help="only this market: on-demand | spot"),
    max_gpus: int | None = typer.Option(
        None, help="at most this many GPUs in all (what your quota allows)"),
    top: int = typer.Option(10, help="plans to show"),
    fmt: RecommendFormat = typer.Option(
        RecommendFormat.table, "--format",
        help="table for people; json or csv for scripts; skypilot: the pick as a SkyPilot "
        "task fragment (resources, num_nodes)"),
    plot: Path | None = typer.Option(None, help="write the time-cost Pareto frontier PNG"),
    explain: bool = typer.Option(
        False, "--explain", help="show scaling, revocation risk and what was cut"),
    artifact: Path | None = ARTIFACT_OPTION,
    catalog: list[Path] | None = CATALOG_OPTION,
    schema: bool = typer.Option(
        False, "--schema", help="print the JSON Schema of --format json and exit"),
) -> None:
    """Recommend the cheapest cluster that meets --deadline, or the fastest within --budget.

    Give --deadline, --budget or both: with a budget the fastest plan within it wins. Spot
    plans carry a Monte Carlo of revocations; times and costs are quoted at --confidence.

    Examples:

      advisor recommend --model resnet50 --deadline 24h

      advisor recommend --model bert_large --budget 300 --provider aws --epochs 1 --format json

      advisor recommend --model resnet50 --deadline 2d --budget 400 --gpu V100,A100 --explain

      advisor recommend --model resnet18 --deadline 6h --precision amp --plot frontier.png

      advisor recommend --model resnet50 --deadline 24h --format skypilot > task.yaml

      advisor recommend --model llama_8b --tokens 1B --deadline 3d --precision bf16

      advisor recommend --card my-model.json --tokens 5B --deadline 2d --precision bf16

    The same from Python: `from advisor import recommend`.
    """
    from advisor.api import recommend as run
    from advisor.errors import AdvisorError

    if schema:
        from advisor.schema import recommendation_schema

        emit_json(recommendation_schema())
        return
    model = _model(model, model_argument) if card is None else model or model_argument
    if plot is not None:
        _check_plot(plot)
    try:
        result = run(model, card=card, tokens=tokens, seq_len=seq_len, image_size=image_size,
                     deadline=deadline, budget=budget, confidence=confidence,
                     epochs=epochs, samples=samples, steps=steps, batch_per_gpu=batch_per_gpu,
                     global_batch=global_batch, batch_policy=batch_policy, precision=precision,
                     channels_last=channels_last, optimizer=optimizer,
                     providers=provider or (), regions=region or (),
                     gpus=gpu or (), max_nodes=max_nodes, artifact=artifact, catalog=catalog,
                     top=top, market=market, max_gpus=max_gpus,
                     max_nodes_limit=max_nodes_limit)
    except AdvisorError as error:
        fail_with(error, FLAGS)
    for message in result.warnings:
        warn(message)
    _report(result, fmt, explain)
    if plot is not None:
        from advisor.plot import plot_frontier

        try:
            plot_frontier(result.ranking, plot,
                          f"{result.workload.model}: time and cost of every plan")
        except (OSError, RuntimeError) as error:
            fail(f"cannot write the plot {plot}: {error}")


def _check_plot(plot: Path) -> None:
    """Refuse, before any work, a --plot that names no writable file (matplotlib would write
    DIR.png beside a directory)."""
    if plot.is_dir():
        fail(f"--plot {plot} is a directory; give a file name such as {plot / 'frontier.png'}")
    if not plot.parent.is_dir():
        fail(f"--plot {plot}: no folder {plot.parent}; create it or give another file name")


def _model(option: str | None, argument: str | None) -> str:
    """--model, or the model named without it (`advisor recommend resnet50 ...` also works)."""
    if option and argument and option != argument:
        fail(f"two models given, --model {option} and {argument}; give one")
    if not (option or argument):
        fail(f"give the model to train with --model, one of: {', '.join(_model_names())}; "
             "or a card file with --card")
    return option or argument


def _model_names() -> list[str]:
    from advisor.api import model_cards
    from advisor.errors import AdvisorError

    try:
        return list(model_cards())
    except AdvisorError as error:
        fail_with(error)


def _report(result, fmt: RecommendFormat, explain: bool) -> None:
    from gpuadvisor.durations import format_duration

    explained = result.explain() if explain else None
    if fmt is RecommendFormat.json:
        emit_json(result.to_dict(explain=explain))
        return
    if fmt is RecommendFormat.skypilot:
        import yaml

        sys.stdout.write(yaml.safe_dump(result.to_skypilot(), sort_keys=False))
        return
    if fmt is RecommendFormat.csv:
        emit_csv(result.plans, [key for key in result.pick if key != "shape"])
        return
    _table(result.plans, result.ranking, result.workload, result.as_of, format_duration)
    if explained:
        from rich.console import Console

        Console().print("\n".join(render(explained)), highlight=False, markup=False)
    else:  # --explain prints the whole step; without it, only what to do about it
        _per_step_hint(result.step)


def _table(rows, plans, work, as_of, format_duration) -> None:
    from rich.console import Console

    c = plans.constraints
    goal = " and ".join(
        ([f"deadline {format_duration(c.deadline_s)}"] if c.deadline_s is not None else [])
        + ([f"budget {format_usd(c.budget_usd)}"] if c.budget_usd is not None else []))
    at = f"{c.confidence:.0%}"
    cells = [{
        "rank": f"*{row['rank']}" if row["rank"] == 1 else str(row["rank"]),
        "where": f"{row['provider']} {row['region']}", "provider": row["provider"],
        "region": row["region"], "shape_short": row["shape"],
        "instance_type": row["instance_type"], "shape": row["shape"], "market": row["market"],
        "throughput": _rate(row["throughput"]),
        "batch": f"{row['micro_batch']}x{row['accumulation']}",
        "batch_short": f"{row['micro_batch']}x{row['accumulation']}"
                       + SHORT_REMEDY[row["remedy"]],
        "remedy": row["remedy"] + (f" +{row['remedy_slowdown']:.0%}"
                                   if row["remedy_slowdown"] >= 0.005 else ""),
        "time": f"{format_duration(row['time_p50_s'])}-{format_duration(row['time_p90_s'])}",
        "cost": f"{format_usd(row['cost_p50'])}-{format_usd(row['cost_p90'])}",
        "time_conf": format_duration(row["time_at_confidence_s"]),
        "cost_conf": format_usd(row["cost_at_confidence"]),
        "p_deadline": "-" if row["p_deadline"] is None else f"{row['p_deadline']:.2f}",
        "provenance": row["provenance"],
    } for row in rows]
    headers = {**TABLE_COLUMNS, "time_conf": f"time@{at}", "cost_conf": f"cost@{at}",
               "provider": "cloud", "region": "region", "shape_short": "GPUs x n",
               "batch_short": "batch"}
    batch = (f"global batch {work.global_batch:,}" if work.batch_policy == "fixed-global"
             else f"{work.batch_per_gpu:,} per GPU")
    title = (f"{work.card or work.model} in {work.precision}: {goal} at {at} confidence; {batch} "
             f"({work.batch_policy}); {len(plans.ranked):,} of {len(plans.candidates):,} "
             "plans qualify")
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
    _quota_footer(rows)
    if work.precision == "fp32":  # the default, which a 16-bit recipe's user may not mean
        console.print("fp32 is PyTorch's default: its matrix products leave the tensor cores "
                      "idle; a job that autocasts to 16 bits is priced with --precision amp "
                      "(or bf16)", style="dim", highlight=False)
    if left_out:
        console.print(f"narrow console hides {left_out}; --format json has all", style="dim")


def _quota_footer(plans: list[dict]) -> None:
    """One line when shown plans exceed a fresh account's default quotas (advisor.quotas)."""
    from rich.console import Console

    over = [plan for plan in plans if plan.get("quota")]
    if over:
        Console().print(
            f"quota: {len(over)} of these plans need more than a fresh account's default "
            f"quota (the pick: {plans[0]['quota'] or 'none'}); request an increase first, "
            "or restrict with --max-gpus", style="dim", highlight=False, markup=False)


def cut_words(cut: dict) -> str:
    """A cut (advisor.reasons.Cut as a dict) as the phrase the table and --explain print."""
    reason = Reason(cut["reason"])
    if reason is Reason.MEMORY:
        return (f"memory: needs {cut['need_mib']:,.0f} MiB per GPU at micro-batch 1, "
                f"{cut['gpu']} has {cut['gpu_memory_mib']:,.0f} MiB")
    if reason is Reason.PRECISION:
        return f"precision: {cut['gpu']} has no bf16 (use amp there)"
    if reason in (Reason.MISSES_DEADLINE, Reason.OVER_BUDGET):
        return f"{CUT_WORDS[reason]} at {cut['confidence']:.0%} confidence"
    return CUT_WORDS[reason]


def render(explained: dict) -> list[str]:
    """The explanation (Recommendation.explain()) as lines for people."""
    from gpuadvisor.durations import format_duration

    lines = _step_lines(explained.get("step"))
    if explained.get("measured_by"):
        lines.append("The pick's configuration was measured: its samples/s are the median "
                     f"of the figures of {explained['measured_by']} (its range spans every "
                     "stack that measured it)")
    if explained["scaling"]:
        lines.append("Scaling of the pick's instance (marginal efficiency of each added node; "
                     f"worth adding while >= {explained['scaling_threshold']}):")
        for step in explained["scaling"]:
            eff = step["marginal_efficiency"]
            mark = "" if eff is None else f"  efficiency {eff:.2f}" + (
                "" if step["worth_adding"] else "  (past the knee)")
            lines.append(f"  {step['nodes']} node(s): {step['throughput']:,.1f} samples/s, "
                         f"speed-up {step['speedup']:.2f}x{mark}")
    risk = explained["revocation_risk"]
    lines.extend(_overhead_lines(explained.get("overheads"), bool(risk) and
                                 risk["market"] == "spot", format_duration))
    if risk and risk["market"] == "spot":
        life = risk["node_lifetime"]
        mean = "unbounded" if life["mean_s"] is None else format_duration(life["mean_s"])
        cap = "" if life.get("cap_s") is None else f", cut at {format_duration(life['cap_s'])}"
        lines.append(
            f"Revocation risk: node life Weibull(shape {life['shape']:g}, mean {mean}{cap}; "
            f"P(revoked within 1h) {life['p_revoked_1h']:.0%}, within 24h "
            f"{life['p_revoked_24h']:.0%}; {life['source']}), cluster MTBF "
            f"{format_duration(risk['cluster_mtbf_s'])}, {risk['revocations_expected']:g} "
            "revocations expected, checkpoint every "
            f"{format_duration(risk['checkpoint_interval_s'])} (Young/Daly); time P50 "
            f"{format_duration(risk['time_p50_s'])}, P90 {format_duration(risk['time_p90_s'])}")
    elif risk:
        lines.append("Revocation risk: none (on-demand nodes are not revoked)")
    if explained["filtered"]:
        lines.append("Filtered out:")
        lines.extend(f"  {cut['count']:>7,}  {cut_words(cut)}" for cut in explained["filtered"])
    return lines


def _per_step_hint(parts: dict) -> None:
    """One dim line, the first of what to do about the pick's step (`_step_lines`' hints:
    most of it does not grow with the batch, or the GPU waits on the host), if any."""
    from rich.console import Console

    from advisor.explain import step

    lines = _step_lines(step(parts))[1:]
    if lines:
        Console().print(lines[0].strip() + " (--explain for the whole step)", style="dim",
                        highlight=False, markup=False)


STEP_WORDS = {"compute": "arithmetic", "memory": "memory-bound work",
              "communication": "gradient exchange", "per_step": "per-step costs"}


def _step_lines(step: dict | None) -> list[str]:
    """What the pick's step is spent on, and a way out when what does not grow with the batch
    takes most of it."""
    if not step:
        return []
    shares = ", ".join(f"{STEP_WORDS[part]} {share:.0%}"
                       for part, share in step["shares"].items())
    lines = [f"Step of the pick, {step['seconds'] * 1e3:,.0f} ms by the fitted physics "
             f"(before the learned correction): {shares}"]
    if step["per_step_bound"]:
        lines.append(f"  {step['per_step_share']:.0%} of each step does not grow with the "
                     "batch (gradient exchange, per-step costs): fewer, larger steps (a larger "
                     "--global-batch) spend less of the run on it")
    if step.get("host_bound"):
        lines.append(f"  the host takes {step['host_seconds'] * 1e3:,.0f} ms to dispatch the "
                     "step's kernels, longer than the GPU's work: the GPU waits on it, so a "
                     "faster GPU gains little; a larger per-GPU batch or a compiled step "
                     "(torch.compile, CUDA graphs) gains more")
    if step.get("transposes_seconds", 0) > 0:
        lines.append(f"  {step['transposes_share']:.0%} of it is cuDNN transposing NCHW "
                     "tensors around the 16-bit convolutions: a job kept channels-last "
                     "(model.to(memory_format=torch.channels_last), priced with "
                     "--channels-last) does not spend it")
    return lines


def _overhead_lines(overheads: dict | None, spot: bool, format_duration) -> list[str]:
    """The pick's start-up and, on spot, what a revocation stalls, each part with its source."""
    if not overheads:
        return []

    def seconds(value: float) -> str:  # minutes would round a 87 s boot to "1m"
        return f"{value:.0f} s" if value < 600 else format_duration(value)

    parts = [("VM start", "vm_s"), ("image, install, first step", "first_step_s")]
    head = f"Overheads: start-up {seconds(overheads['startup_s'])}"
    if spot:
        parts.append(("rejoin after a revocation", "rejoin_s"))
        head += (f"; a revocation stalls the job {seconds(overheads['revocation_wait_s'])} "
                 f"({overheads['revocation_wait']})")
    save = overheads["checkpoint_s"]
    return [
        head + ":",
        *(f"  {label} {seconds(overheads[key]['seconds'])}: {overheads[key]['source']}"
          for label, key in parts),
        *([f"  one checkpoint {seconds(save['seconds'])}: {save['source']}"]
          if save["seconds"] is not None else []),
    ]


def _rate(samples_per_s: float) -> str:
    """Samples a second to 3 significant digits below 100 (an LLM's 8.00 sequences/s)."""
    from advisor.api import rate_decimals

    if samples_per_s >= 100 or samples_per_s <= 0:
        return f"{samples_per_s:,.0f}"
    return f"{samples_per_s:.{rate_decimals(samples_per_s)}f}"
