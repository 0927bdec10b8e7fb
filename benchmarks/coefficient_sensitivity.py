"""Which published source (or GPU) sets which fitted coefficient: the fit of the step's
physics (advisor.fitting.fit_throughput_core) on every published figure, then again without
each source's (or each GPU's) rows in turn, and how far each coefficient moves.

A coefficient one source alone moves far is evidence of that source's habits (its hosts, its
input pipeline, its software's age) rather than of the physics, and whatever the fit learns
from it reaches every prediction: the forty-seventh session's batch-12 rows of
pytorch-gpu-benchmark, launch-bound on cloud notebooks, set the step's fixed cost and the
GPU's floor per kernel, which a held-out NCF step of 7 ms then paid, until the forty-eighth
session gave each code base's hosts a speed of their own. A source is a code
base (`advisor.fitting.code_base`: a DeepLearningExamples model folder, a repository), with
every MLPerf submission one source. `--by gpu` drops each GPU's rows instead: a coefficient
that only one GPU's rows pin down is one a fit without that GPU has to guess (without the
V100, whose rows are the only FP32 ones from NVIDIA's containers of 2019-2021, FP32
convolutions were fitted 1.27x slower before each code base's hosts had a speed of their
own, 1.06x after). Every refit keeps the priors the whole data
chose (`tuned_priors`), so a change is the data's doing alone.

`--by prior` asks the other question: what the data say about a coefficient at all. It refits
on every row with that coefficient's prior divided and multiplied by PRIOR_SCALE, one
coefficient at a time, and prints the fitted value under each and its elasticity, the log
change of the fit over the log change of the prior: 0 where the data set the coefficient, 1
where its prior does (a step's fixed cost: 2.3, 5.1 and 10.3 ms fitted with priors of 1, 5
and 25 ms, the stacks' offsets and the hosts' factors absorbing the difference). A coefficient
its prior sets is only as good as the prior's physics.

    .venv/bin/python benchmarks/coefficient_sensitivity.py
    .venv/bin/python benchmarks/coefficient_sensitivity.py --by gpu --coefficients conv_fp32
    .venv/bin/python benchmarks/coefficient_sensitivity.py --by prior

About 10 seconds on 2 cores (one refit per source: 26 of them); `--by prior` makes two refits
per coefficient.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor import physics
from advisor.artifact import MLPERF_CODE, recorded_software
from advisor.features import take
from advisor.fitting import fit_throughput_core, throughput_data, tuned_priors
from gpuadvisor.store import Store

# The step constants and the efficiencies the README's fit paragraph quotes.
DEFAULT_COEFFICIENTS = ("fixed", "kernel_floor", "tensor_launch", "host_dispatch",
                        "compute_fp32", "conv_fp32", "compute_tensor", "conv_tensor",
                        "compute_tf32", "conv_tf32", "memory")
# `--by prior` refits with each coefficient's prior divided and multiplied by this.
PRIOR_SCALE = 5.0


def source_of(software: str) -> str:
    """A published row's source (its cited code base; MLPerf's submissions as one)."""
    fields = recorded_software(software) or {}
    code = str(fields.get("code") or fields.get("container") or "uncited")
    return MLPERF_CODE if code.startswith(MLPERF_CODE) else code


def published_rows() -> tuple[dict, np.ndarray]:
    from advisor.importers.published import import_published

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "published.db"
        with Store(store) as db:
            import_published(db)
        with Store(store, readonly=True) as db:
            features, throughput, _, _ = throughput_data(db)
    return features, throughput


def refit(features: dict, throughput: np.ndarray, priors: dict, rows: np.ndarray) -> dict:
    core = fit_throughput_core(take(features, rows), throughput[rows], priors)
    return core["coefficients"]


def prior_elasticities(features: dict, throughput: np.ndarray, priors: dict,
                       terms: list[str]) -> dict[str, tuple[float, float, float]]:
    """Per term, (fitted with its prior / PRIOR_SCALE, fitted with it * PRIOR_SCALE, the
    elasticity of the fit to the prior: 0 where the data set the term, 1 where the prior
    does). A prior below the term's lower bound (fitting.LOWER_LOG_BOUND) is held there."""
    from joblib import Parallel, delayed

    base = {**physics.PRIOR, **priors}
    rows = np.arange(len(throughput))
    fits = Parallel(n_jobs=-1)(
        delayed(refit)(features, throughput, {**priors, term: base[term] * scale}, rows)
        for term in terms for scale in (1 / PRIOR_SCALE, PRIOR_SCALE))
    out = {}
    for i, term in enumerate(terms):
        low, high = fits[2 * i][term], fits[2 * i + 1][term]
        out[term] = (low, high, float(np.log(high / low) / np.log(PRIOR_SCALE ** 2)))
    return out


def print_prior_elasticities(features: dict, throughput: np.ndarray, priors: dict,
                             terms: list[str]) -> None:
    base = {**physics.PRIOR, **priors}
    whole = refit(features, throughput, priors, np.arange(len(throughput)))
    print(f"{len(throughput)} published configurations; each coefficient refitted with its "
          f"prior / {PRIOR_SCALE:g} and x {PRIOR_SCALE:g} (elasticity: 0 the data set it, 1 its "
          "prior does)", file=sys.stderr)
    print(f"{'coefficient':16s} {'prior':>10s} {'fitted':>10s} {f'prior/{PRIOR_SCALE:g}':>10s} "
          f"{f'prior x{PRIOR_SCALE:g}':>10s} {'elasticity':>10s}")
    for term, (low, high, elasticity) in prior_elasticities(features, throughput, priors,
                                                             terms).items():
        print(f"{term:16s} {base[term]:10.4g} {whole[term]:10.4g} {low:10.4g} {high:10.4g} "
              f"{elasticity:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--coefficients", nargs="+", default=list(DEFAULT_COEFFICIENTS),
                        help="the fitted coefficients to follow (advisor.physics.TERMS)")
    parser.add_argument("--by", choices=("source", "gpu", "prior"), default="source",
                        help="what each refit leaves out: one source's rows or one GPU's; "
                             "`prior`: none, each coefficient's prior scaled instead")
    parser.add_argument("--top", type=int, default=10,
                        help="the groups that move the coefficients most, per coefficient")
    args = parser.parse_args()
    unknown = sorted(set(args.coefficients) - set(physics.TERMS))
    if unknown:
        sys.exit(f"error: unknown coefficient {', '.join(unknown)}; "
                 f"known: {', '.join(physics.TERMS)}")
    from joblib import Parallel, delayed

    features, throughput = published_rows()
    priors, _ = tuned_priors(features, throughput)
    if args.by == "prior":
        print_prior_elasticities(features, throughput, priors, args.coefficients)
        return
    whole = refit(features, throughput, priors, np.arange(len(throughput)))
    groups = np.array([source_of(str(s)) for s in features["software"]]) \
        if args.by == "source" else np.asarray(features["gpu"]).astype(str)
    names = sorted(set(groups), key=lambda name: (-(groups == name).sum(), name))
    print(f"{len(throughput)} published configurations, {len(names)} {args.by}s; each "
          f"coefficient fitted on all, then without each {args.by} (the whole data's priors)",
          file=sys.stderr)
    without = Parallel(n_jobs=-1)(
        delayed(refit)(features, throughput, priors, np.flatnonzero(groups != name))
        for name in names)
    for term in args.coefficients:
        moves = [(np.log(fit[term] / whole[term]), name) for fit, name in zip(without, names)]
        moves.sort(key=lambda move: -abs(move[0]))
        print(f"\n{term}: {whole[term]:.4g} fitted on all")
        for change, name in moves[:args.top]:
            print(f"  {np.exp(change):6.3f}x without {name} ({(groups == name).sum()} rows)")


if __name__ == "__main__":
    main()
