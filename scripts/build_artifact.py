"""Build datasets/model_artifact.json from the data the repository ships, and nothing else.

A temporary store receives datasets/measurements/*.json (the local sweeps) and
datasets/published_throughput.csv through the same importers a user runs; `advisor fit` then
fits on it. Never reads ../shared/reference: third-party data must not enter the artifact,
nor the user data dir (its own lifetime prior, say) of whoever runs this.
Every published row enters, NVIDIA's figures from the pytorch-20.06 container too (its first
Ampere release: A100-40GB ResNet-50 at half the speed the 21.03 container reaches on the same
silicon). They were left out until the seventeenth session of 2026-11-28, when the features
carried no software version and they would have read as a slow GPU; a software stack has had
effects of its own since 2026-11-25, which take a container's speed, and the evaluation
(benchmarks/model_accuracy.py) has always fitted with them. With them in, the H200 trials
predicted by a fit without them (benchmarks/measured_vs_predicted.py) are 24.4% off, 93%
inside, against 27.2% and 84%; and the A100-80GB held out, 17.4% against 21.0% without them.

    .venv/bin/python scripts/build_artifact.py [--output datasets/model_artifact.json]
        [--leave-out h200.json]

--leave-out fits without a measurements file, for a test on data the fit has never seen: the
advisor's predictions for a GPU's trials before they join the fit
(benchmarks/measured_vs_predicted.py).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from gpuadvisor import data

SHIPPED = Path(__file__).resolve().parent.parent / "datasets" / "model_artifact.json"


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def measurement_files() -> list[Path]:
    return sorted(data.shipped("measurements").glob("*.json"))


def build(output: Path, leave_out: tuple[str, ...] = ()) -> None:
    advisor = [sys.executable, "-c", "from advisor.cli import main; main()"]
    with tempfile.TemporaryDirectory() as tmp:
        # Only shipped data is read (an empty home), and BLAS sums in one order, one thread,
        # however many cores the machine has or a caller's environment allows: the fit's
        # last digits, and so the shipped file, do not depend on them.
        env = {**os.environ, "GPUADVISOR_HOME": tmp, **dict.fromkeys(BLAS_THREADS, "1")}
        store = str(Path(tmp) / "shipped.db")
        imports = [["data", "import", "published", str(data.shipped("published_throughput.csv"))]]
        imports += [["data", "import", "runs", str(path)]
                    for path in measurement_files() if path.name not in leave_out]
        for args in imports:
            subprocess.run(advisor + args + ["--store", store, "--format", "json"], check=True,
                           stdout=subprocess.DEVNULL, env=env)
        subprocess.run(advisor + ["fit", "--store", store, "--output", str(output),
                                  "--format", "json"],
                       check=True, stdout=subprocess.DEVNULL, env=env)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=SHIPPED)
    parser.add_argument("--leave-out", action="append", default=[], metavar="FILE.json",
                        help="a file of datasets/measurements/ to fit without (repeatable)")
    args = parser.parse_args()
    known = {path.name for path in measurement_files()}
    if unknown := set(args.leave_out) - known:
        parser.error(f"no measurements file {', '.join(sorted(unknown))}; the files are "
                     f"{', '.join(sorted(known))}")
    build(args.output, tuple(args.leave_out))
