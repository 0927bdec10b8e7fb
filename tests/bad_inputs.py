"""The bad inputs every command line is tried with (issue 12 item 10), the files they name, and
the one runner that judges each: one line on stderr, the documented exit status, no
traceback, and nothing written (every file under the working folder hashes the same before
and after: a given store keeps its rows, no artifact, plot or store appears).
tests/test_bad_inputs.py asserts it per input; benchmarks/bad_inputs.py prints the counts."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_ARTIFACT = ROOT / "datasets" / "model_artifact.json"
SHIPPED_CATALOG = ROOT / "datasets" / "catalog_gcp.csv"
RUNS_JSON = ROOT / "datasets" / "measurements" / "local-cpu.json"

# Exit statuses of both CLIs (README "Command-line conventions").
USAGE, FAILURE, BUDGET = 2, 1, 3


@dataclass(frozen=True)
class Case:
    """One bad input: the command line (`{name}` names a file of `make_files`), the exit
    status it must give and a phrase its error line must hold."""

    app: str  # advisor | profiler
    args: tuple[str, ...]
    code: int
    says: str = ""
    stdout_report: bool = False  # `advisor check` reports on stdout, not as one error line

    @property
    def id(self) -> str:
        return f"{self.app} " + " ".join(self.args)


@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    traceback: str | None
    changed: list[str]

    def problems(self, case: Case) -> list[str]:
        """What this outcome breaks of the rules; empty when the input was handled cleanly."""
        found = []
        if self.traceback:
            found.append(f"traceback: {self.traceback.strip().splitlines()[-1]}")
        if self.code != case.code:
            found.append(f"exit {self.code}, expected {case.code}")
        if self.changed:
            found.append(f"files written or changed: {', '.join(self.changed)}")
        if "Traceback (most recent call last)" in self.err + self.out:
            found.append("a traceback was printed")
        if "Infinity" in self.out or "NaN" in self.out:
            found.append("non-finite number printed")
        if case.stdout_report or case.code == 0:
            return found
        lines = self.err.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("error: "):
            found.append(f"stderr is not one error line: {self.err!r}")
        elif case.says.lower() not in lines[0].lower():
            found.append(f"error does not say {case.says!r}: {lines[0]}")
        return found

    @property
    def kind(self) -> str:
        """traceback, leak (something written) or clean-or-wrong, for the counts."""
        return "traceback" if self.traceback else "leak" if self.changed else "handled"


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (a directory as such) with a hash of its content; a store's
    write-ahead log counts once it holds anything."""
    state = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if key.endswith("-shm") or (key.endswith("-wal") and not path.stat().st_size):
            continue  # SQLite's shared-memory index and an empty log: no content
        state[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def run(case: Case, files: dict[str, Path], workdir: Path) -> Outcome:
    """Run the command in this process through the console script's main(), as a user would."""
    import advisor.cli
    import profiler.cli

    main = {"advisor": advisor.cli.main, "profiler": profiler.cli.main}[case.app]
    args = [arg.format(**{k: str(v) for k, v in files.items()}) for arg in case.args]
    before = snapshot(workdir)
    out, err = io.StringIO(), io.StringIO()
    code, trace = None, None
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main(args)
    except SystemExit as exited:
        code = exited.code if isinstance(exited.code, int) else 0 if exited.code is None else 1
    except BaseException:  # what escapes main() is a traceback the user would see
        trace = traceback.format_exc()
    finally:
        os.chdir(cwd)
    after = snapshot(workdir)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return Outcome(code, out.getvalue(), err.getvalue(), trace, changed)


# --- the files the cases name -------------------------------------------------------------

SPEC = "name: bad\nprovider: local\nmodels: [resnet18]\nimage_size: 32\nmax_seconds: 10\n"
CATALOG_HEADER = SHIPPED_CATALOG.read_text().splitlines()[0]
BINARY = bytes(range(256)) * 4


def file_key(name: str) -> str:
    """The name a case gives a file: art/no-x.json -> art_no_x_json."""
    return name.replace("/", "_").replace(".", "_").replace("-", "_")


def make_files(workdir: Path) -> dict[str, Path]:
    """Write every input file under `workdir`; returns their names for the cases' `{name}`."""
    from gpuadvisor.store import Store

    files: dict[str, Path] = {}

    def write(name: str, content: str | bytes) -> None:
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        files[file_key(name)] = path

    def folder(name: str) -> None:
        (workdir / name).mkdir(parents=True, exist_ok=True)
        files[file_key(name)] = workdir / name

    folder("dir")
    files["missing"] = workdir / "no-such-file"
    files["smoke_yaml"] = ROOT / "specs" / "smoke.yaml"  # good inputs beside the bad ones
    files["runs_json"] = RUNS_JSON
    write("binary.bin", BINARY)
    write("empty.txt", "")
    write("garbage.txt", "this is not what you think it is\n\x7f{[\n")

    # stores: one with trials (must keep them), one with no trial, one that is no store
    with Store(workdir / "store.db") as db:
        from advisor.importers.runs import import_runs

        import_runs(RUNS_JSON, db)
    files["store"] = workdir / "store.db"
    Store(workdir / "empty-store.db").close()
    files["empty_store"] = workdir / "empty-store.db"
    write("not-a-store.db", "SQLite format 3 but not really\n")
    write("zero.db", "")

    # artifacts
    shipped = json.loads(SHIPPED_ARTIFACT.read_text())
    write("art/empty.json", "{}")
    write("art/list.json", "[]")
    write("art/null.json", "null")
    write("art/truncated.json", SHIPPED_ARTIFACT.read_text()[:500])
    write("art/schema99.json", json.dumps({**shipped, "schema_version": 99}))
    write("art/schema_str.json", json.dumps({**shipped, "schema_version": "2"}))
    write("art/version_only.json", json.dumps({"schema_version": shipped["schema_version"]}))
    for key in ("throughput", "lifetime", "startup_s", "checkpoint_s", "recovery_s"):
        write(f"art/no_{key}.json", json.dumps({k: v for k, v in shipped.items() if k != key}))
    nan = json.loads(json.dumps(shipped))
    coefficients = nan["throughput"].get("coefficients") or {}
    for key in list(coefficients)[:3]:
        coefficients[key] = float("nan")
    write("art/nan.json", json.dumps(nan))  # Python writes NaN, as a broken fit would
    write("art/utf16.json", SHIPPED_ARTIFACT.read_text().encode("utf-16"))
    write("art/throughput_list.json", json.dumps({**shipped, "throughput": []}))
    # hand edits of the throughput section that keep it valid JSON of the right schema
    for name, key, value in (("effects_text", "unit_effects", "fast"),
                             ("calibration_text", "calibration", "wide"),
                             ("coefficient_text", "coefficients",
                              {**shipped["throughput"]["coefficients"], "memory": "1.9"}),
                             ("no_coefficient", "coefficients",
                              {k: v for k, v in shipped["throughput"]["coefficients"].items()
                               if k != "memory"})):
        write(f"art/{name}.json", json.dumps({**shipped, "throughput": {
            **shipped["throughput"], key: value}}))

    # catalogs
    good_rows = SHIPPED_CATALOG.read_text().splitlines()[1:4]
    write("cat/header_only.csv", CATALOG_HEADER + "\n")
    write("cat/utf16.csv", SHIPPED_CATALOG.read_text().encode("utf-16"))
    write("cat/no_price.csv", "provider,region,instance_type\ngcp,us-central1,n1\n")
    cells = good_rows[0].split(",")
    price = CATALOG_HEADER.split(",").index("price_on_demand")
    for label, value in (("nan", "nan"), ("inf", "inf"), ("negative", "-3"), ("zero", "0"),
                         ("text", "cheap")):
        row = cells[:price] + [value] + cells[price + 1:]
        write(f"cat/price_{label}.csv", "\n".join([CATALOG_HEADER, ",".join(row)]) + "\n")
    gpus = CATALOG_HEADER.split(",").index("gpus_per_node")
    for label, value in (("zero", "0"), ("negative", "-1"), ("huge", "100000"), ("text", "x")):
        row = cells[:gpus] + [value] + cells[gpus + 1:]
        write(f"cat/gpus_{label}.csv", "\n".join([CATALOG_HEADER, ",".join(row)]) + "\n")
    write("cat/ragged.csv", CATALOG_HEADER + "\n" + "gcp,us-central1\n")

    # sweep specs
    specs = {
        "utf16": SPEC.encode("utf-16"), "binary": BINARY, "list": "- a\n- b\n",
        "scalar": "42\n", "empty": "", "bad_yaml": "name: [unclosed\n",
        "inf_timeout": SPEC + "startup_timeout: .inf\n",
        "nan_timeout": SPEC + "startup_timeout: .nan\n",
        "inf_seconds": SPEC.replace("max_seconds: 10", "max_seconds: .inf"),
        "nan_seconds": SPEC.replace("max_seconds: 10", "max_seconds: .nan"),
        "inf_tolerance": SPEC + "tolerance: .inf\n",
        "inf_cost": SPEC + "max_cost: .inf\n",
        "nan_cost": SPEC + "max_cost: .nan\n",
        "inf_revoke": SPEC.replace("[resnet18]", "[resnet18]\nnodes: [2]")
        + "revocation: {node: 1, at_seconds: .nan}\n",
        "inf_lifetime": SPEC.replace("[resnet18]", "[resnet18]\nnodes: [2]")
        + "revocation: {node: 1, lifetime: {distribution: exponential, mean_seconds: .inf}}\n",
        "nodes_1000": SPEC + "nodes: [1000]\n",
        "nodes_million": SPEC + "nodes: [1000000]\n",
        "nproc_1000": SPEC + "nproc_per_node: 1000\n",
        "gpus_1000": SPEC.replace("local", "aws") + "instance_types: [p3.2xlarge]\n"
        "gpus_per_node: 1000\n",
        "batch_huge": SPEC + "batch_per_gpu: [1000000000000]\n",
        "image_huge": SPEC.replace("image_size: 32", "image_size: 1000000"),
        "seq_huge": SPEC.replace("resnet18", "gpt2").replace("image_size: 32",
                                                             "seq_len: 100000000"),
        "checkpoint_huge": SPEC + "checkpoint_every: 100000000000000000000000\n",
        "grid_358400": SPEC.replace("models: [resnet18]", "models: [resnet18, resnet50]")
        + f"nodes: {list(range(1, 101))}\nbatch_per_gpu: {list(range(1, 449))}\n"
        "precision: [fp32, tf32, amp, bf16]\n",
        "local_p5": SPEC + "instance_types: [p5.48xlarge]\n",
        "local_gpu": SPEC + "gpu_type: H100\n",
        "local_spot": SPEC + "spot: true\n",
        "unknown_key": SPEC + "nodez: [2]\n",
        "bad_name": SPEC.replace("name: bad", "name: Bad Name!"),
        "bad_model": SPEC.replace("resnet18", "resnet9000"),
        "zero_nodes": SPEC + "nodes: [0]\n",
        "negative_batch": SPEC + "batch_per_gpu: [-4]\n",
        "bad_precision": SPEC + "precision: fp64\n",
        "bad_sink": SPEC + "results: ftp://somewhere\n",
        "bad_provider": SPEC.replace("provider: local", "provider: azure"),
        "string_nodes": SPEC + "nodes: many\n",
        "bool_seconds": SPEC.replace("max_seconds: 10", "max_seconds: [1, 2]"),
        "revoke_missing_node": SPEC + "revocation: {node: 5, at_seconds: 3}\n",
        "cloud_no_types": SPEC.replace("local", "gcp"),
        "negative_price": SPEC + "price_per_hour: -1\n",
        "inf_price": SPEC + "price_per_hour: .inf\n",
    }
    for name, text in specs.items():
        write(f"spec/{name}.yaml", text)
    folder("spec/dir.yaml")

    # CM-DARE folders: none of its layout, empty CSVs, garbage CSVs, binary CSVs
    folder("cmdare_empty")
    folder("cmdare_unrelated")
    (workdir / "cmdare_unrelated" / "other").mkdir()
    for layout in ("speed_data/x.csv", "checkpoint/whole_data.csv", "startup_time/pre_east/a.csv",
                   "chief_rejoining/base.csv", "speed_and_cluster_size/k80/run1/a.csv"):
        for label, content in (("emptycsv", ""), ("garbage", "a;b\n1;2;3\n\"unclosed\n"),
                               ("binary", BINARY), ("header", "step,value\n")):
            write(f"cmdare_{label}/{layout}", content)
            files[f"cmdare_{label}"] = workdir / f"cmdare_{label}"

    # exchange JSON (import runs), published CSVs, card files, SkyPilot folders
    write("runs/object.json", "{}")
    write("runs/empty_list.json", "[]")
    write("runs/empty_trial.json", "[{}]")
    write("runs/numbers.json", "[1, 2, 3]")
    write("runs/nan.json", json.dumps([{**json.loads(RUNS_JSON.read_text())[0],
                                        "throughput": float("nan"), "trial_key": "nan"}]))
    write("runs/utf16.json", RUNS_JSON.read_text().encode("utf-16"))
    trial = json.loads(RUNS_JSON.read_text())[0]
    write("runs/huge_int.json", json.dumps([{**trial, "nodes": 10**30, "trial_key": "big"}]))
    write("runs/huge_child.json", json.dumps([{**trial, "trial_key": "child",
                                               "startups": [{"node": 10**30}]}]))
    published = (ROOT / "datasets" / "published_throughput.csv").read_text().splitlines()
    columns = published[0].split(",")
    for column, value in (("num_gpus", "1" + "0" * 30), ("throughput", "nan"),
                          ("network_gbps", "inf"), ("batch_per_gpu", "-8")):
        cells = next(csv.reader([published[1]]))
        cells[columns.index(column)] = value
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows([columns, cells])
        write(f"pub/{column}.csv", buffer.getvalue())
    write("pub/header_only.csv", (ROOT / "datasets" / "published_throughput.csv")
          .read_text().splitlines()[0] + "\n")
    write("pub/utf16.csv", (ROOT / "datasets" / "published_throughput.csv").read_bytes()
          .decode().encode("utf-16"))
    write("card/empty.json", "{}")
    write("card/list.json", "[1]")
    write("card/nan.json", json.dumps({"model": "x", "params": float("nan")}))
    write("hf/config.json", "{}")
    write("hf/utf16.json", json.dumps({"model_type": "gpt2"}).encode("utf-16"))
    folder("sky_empty")
    write("sky_garbage/aws_gpu_vms.csv", "not,a,catalog\n1,2\n")
    write("sky_binary/gcp_gpu_vms.csv", BINARY)
    files.update({name: workdir / name for name in ("sky_garbage", "sky_binary")})
    return files


# --- the cases ----------------------------------------------------------------------------

def advisor(code: int, says: str, *args: str) -> Case:
    return Case("advisor", args, code, says)


def profiler(code: int, says: str, *args: str) -> Case:
    return Case("profiler", args, code, says)


RECOMMEND = ("recommend", "--model", "resnet50")
NUMBERS = ("nan", "inf", "-inf", "-1", "0", "1e400", "9" * 400, "-" + "9" * 400)
FILE_KINDS = ("dir", "missing", "binary_bin", "empty_txt", "garbage_txt")
ARTIFACTS = ("art_empty_json", "art_list_json", "art_null_json", "art_truncated_json",
             "art_schema99_json", "art_schema_str_json", "art_version_only_json",
             "art_no_throughput_json", "art_no_lifetime_json", "art_no_startup_s_json",
             "art_no_checkpoint_s_json", "art_no_recovery_s_json", "art_nan_json", "art_utf16_json",
             "art_throughput_list_json", "art_effects_text_json", "art_calibration_text_json",
             "art_coefficient_text_json", "art_no_coefficient_json")
CATALOGS = ("cat_header_only_csv", "cat_utf16_csv", "cat_no_price_csv", "cat_price_nan_csv",
            "cat_price_inf_csv", "cat_price_negative_csv", "cat_price_zero_csv",
            "cat_price_text_csv", "cat_gpus_zero_csv", "cat_gpus_negative_csv",
            "cat_gpus_huge_csv", "cat_gpus_text_csv", "cat_ragged_csv")
STORES = ("not_a_store_db", "zero_db", "dir", "binary_bin", "garbage_txt")
CMDARE = ("cmdare_empty", "cmdare_unrelated", "cmdare_emptycsv", "cmdare_garbage",
          "cmdare_binary", "cmdare_header", "binary_bin", "missing")


def recommend_cases() -> list[Case]:
    """`advisor recommend`: numbers non-finite, negative, zero or past a float; bad files."""
    found: list[Case] = []
    add = found.append
    for flag in ("--epochs", "--budget", "--deadline", "--confidence", "--samples", "--steps",
                 "--tokens", "--global-batch", "--batch-size", "--max-gpus", "--max-nodes",
                 "--top", "--seq-len", "--image-size"):
        for value in NUMBERS:
            goal = () if flag in ("--budget", "--deadline") else ("--deadline", "24h")
            # a GPU bound no cluster reaches: harmless, so taken
            harmless = flag == "--max-gpus" and value == NUMBERS[-2]
            if flag != "--top" or value != NUMBERS[-2]:  # every plan, printed: slow, not bad
                add(advisor(0 if harmless else USAGE, "", *RECOMMEND, *goal, f"{flag}={value}"))
    for value in ("1000", "1000000", str(2**63)):
        add(advisor(USAGE, "--max-nodes", *RECOMMEND, "--deadline", "24h", "--max-nodes", value))
    for value in ("24x", "h", "1e400h", "-5h", "0h", "nanh", "infh", "1d-3h"):
        add(advisor(USAGE, "--deadline", *RECOMMEND, "--deadline", value))
    for value in ("$", "$-5", "1e999", "5 USD extra", "$nan"):
        add(advisor(USAGE, "--budget", *RECOMMEND, "--budget", value))
    for value in ("20X", "-1B", "nanB", "infT", "1e400T"):
        add(advisor(USAGE, "--tokens", "recommend", "--model", "gpt2", "--deadline", "1d",
                    "--tokens", value))
    for name in FILE_KINDS + ARTIFACTS:
        add(advisor(USAGE, "", *RECOMMEND, "--deadline", "24h", "--artifact", f"{{{name}}}"))
    for name in FILE_KINDS + CATALOGS:
        add(advisor(USAGE, "", *RECOMMEND, "--deadline", "24h", "--catalog", f"{{{name}}}"))
    for name in FILE_KINDS + ("card_empty_json", "card_list_json", "card_nan_json",
                              "art_utf16_json"):
        add(advisor(USAGE, "card file", "recommend", "--card", f"{{{name}}}", "--deadline",
                    "24h"))
    add(advisor(USAGE, "--plot", *RECOMMEND, "--deadline", "24h", "--plot", "{dir}"))
    add(advisor(USAGE, "--plot", *RECOMMEND, "--deadline", "24h", "--plot", "{missing}/x.png"))
    add(advisor(USAGE, "--precision", *RECOMMEND, "--deadline", "24h", "--precision", "fp64"))
    add(advisor(USAGE, "--market", *RECOMMEND, "--deadline", "24h", "--market", "black"))
    add(advisor(USAGE, "--batch-policy", *RECOMMEND, "--deadline", "24h",
                "--batch-policy", "whatever"))
    add(advisor(USAGE, "provider", *RECOMMEND, "--deadline", "24h", "--provider", "azure"))
    add(advisor(USAGE, "GPU", *RECOMMEND, "--deadline", "24h", "--gpu", "Z9000"))
    add(advisor(USAGE, "", "recommend", "--model", "", "--deadline", "24h"))
    for flag in ("--region", "--gpu", "--provider"):
        for value in ("", ",,"):
            add(advisor(USAGE, "names nothing", *RECOMMEND, "--deadline", "24h", flag, value))
    add(advisor(USAGE, "", "recommend", "--model", "../../etc/passwd", "--deadline", "24h"))
    return found


def fit_evaluate_cases() -> list[Case]:
    """`advisor fit` and `evaluate`: stores that are none, an empty store, outputs."""
    found: list[Case] = []
    add = found.append
    for command in ("fit", "evaluate"):
        for name in STORES + ("missing",):
            add(advisor(USAGE, "", command, "--store", f"{{{name}}}"))
        add(advisor(USAGE, "", command, "--store", "{empty_store}"))
    add(advisor(USAGE, "", "fit", "--store", "{store}", "--output", "{dir}"))
    add(advisor(USAGE, "", "fit", "--store", "{store}", "--output", "{store}"))
    for split in ("gpu-and-model", ""):
        add(advisor(USAGE, "--split", "evaluate", "--store", "{store}", "--split", split))
    add(advisor(USAGE, "--target", "evaluate", "--store", "{store}", "--target", "loss"))
    add(advisor(USAGE, "", "evaluate", "--store", "{store}", "--max-train-workers", "0"))
    return found


def data_import_cases() -> list[Case]:
    """`advisor data import`: each importer's bad files, and stores that are none."""
    found: list[Case] = []
    add = found.append
    for name in CMDARE:
        add(advisor(USAGE, "", "data", "import", "cmdare", f"{{{name}}}", "--store", "{store}"))
    for name in STORES + ("missing",):  # a failed import leaves no store where none was
        add(advisor(USAGE, "", "data", "import", "cmdare", "{cmdare_garbage}", "--store",
                    f"{{{name}}}"))
    add(advisor(USAGE, "", "data", "import", "runs", "{runs_nan_json}", "--store", "{missing}"))
    for name in FILE_KINDS + ("runs_object_json",
                              "runs_empty_trial_json", "runs_numbers_json", "runs_nan_json",
                              "runs_utf16_json", "runs_huge_int_json",
                              "runs_huge_child_json"):
        add(advisor(USAGE, "", "data", "import", "runs", f"{{{name}}}", "--store", "{store}"))
    for name in STORES:
        if name != "zero_db":  # an empty file is a place for a new store
            add(advisor(USAGE, "", "data", "import", "runs", "{runs_json}", "--store",
                        f"{{{name}}}"))
    for name in FILE_KINDS + ("pub_header_only_csv", "pub_utf16_csv", "pub_num_gpus_csv",
                              "pub_throughput_csv", "pub_network_gbps_csv",
                              "pub_batch_per_gpu_csv"):
        add(advisor(USAGE, "", "data", "import", "published", f"{{{name}}}", "--store",
                    "{store}"))
    add(advisor(USAGE, "", "data", "import", "published", "--source", "their lab", "--store",
                "{store}"))
    return found


def catalog_check_cases() -> list[Case]:
    """`advisor catalog` and `check`."""
    found: list[Case] = []
    add = found.append
    for name in FILE_KINDS + CATALOGS:
        add(advisor(USAGE, "", "catalog", "show", "--file", f"{{{name}}}"))
    add(advisor(USAGE, "provider", "catalog", "show", "--provider", "azure"))
    add(advisor(USAGE, "", "catalog", "show", "--gpu", "Z9000"))
    for value in ("azure", "", "GCP"):
        add(advisor(USAGE, "provider", "catalog", "refresh", "--provider", value))
    for name in ("sky_empty", "sky_garbage", "sky_binary", "missing", "binary_bin"):
        add(advisor(FAILURE, "", "catalog", "import", "skypilot", f"{{{name}}}",
                    "--output-dir", "{dir}"))
    for name in FILE_KINDS[:1] + ARTIFACTS[:6]:
        add(Case("advisor", ("check", "--artifact", f"{{{name}}}"), FAILURE, "",
                 stdout_report=True))
    for name in ("binary_bin", "cat_utf16_csv", "dir"):
        add(Case("advisor", ("check", "--catalog", f"{{{name}}}"), FAILURE, "",
                 stdout_report=True))
    return found


def sweep_cases() -> list[Case]:
    """`profiler sweep`: every spec, as a dry run and (unless too big) for real; flags."""
    found: list[Case] = []
    add = found.append
    for name in SPECS:
        # a spec that would launch too much is tried as a dry run only: were it taken, a real
        # run would start it (test_bad_inputs.py checks that a real run refuses it too)
        for dry in (("--dry-run",),) if name in TOO_BIG else (("--dry-run",), ()):
            add(profiler(USAGE, "", "sweep", f"{{spec_{name}_yaml}}", *dry))
    for name in ("spec_dir_yaml", "missing", "binary_bin", "dir"):
        add(profiler(USAGE, "", "sweep", f"{{{name}}}", "--dry-run"))
    add(profiler(USAGE, "", "sweep", "{smoke_yaml}", "--provider", "azure"))
    add(profiler(USAGE, "", "sweep", "{smoke_yaml}", "--results",
                 "ftp://x"))
    for value in ("nan", "inf", "-1"):
        add(profiler(USAGE, "", "sweep", "{smoke_yaml}", "--max-cost",
                     value))
    for url in ("file://{binary_bin}/records", "file://{binary_bin}", "file:///proc/records"):
        add(profiler(USAGE, "cannot be written", "sweep", "{smoke_yaml}",
                     "--results", url))
    return found


def profiler_cases() -> list[Case]:
    """`profiler runs`, `card`, `cleanup`, `ingest`."""
    found: list[Case] = []
    add = found.append
    for value in ("999999", "-1", "0", str(2**63), "9" * 40):
        add(profiler(USAGE, "", "runs", "--store", "{store}", "--show", value))
    for name in STORES + ("missing",):
        add(profiler(USAGE, "", "runs", "--store", f"{{{name}}}"))
    add(profiler(USAGE, "", "runs", "--store", "{store}", "--output", "{store}"))
    add(profiler(USAGE, "", "runs", "--store", "{store}", "--output", "{dir}"))
    add(profiler(USAGE, "", "runs", "--store", "{store}", "--format", "parquet"))
    for name in FILE_KINDS + ("hf_config_json", "hf_utf16_json"):
        add(profiler(USAGE, "", "card", "--config", f"{{{name}}}"))
    for value in ("nosuchmodel", "resnet50@abc", "bert_large@-5"):
        add(profiler(USAGE, "", "card", value))
    for value in ("nomodule:build", "garbage", "os:getcwd", ":"):
        add(profiler(USAGE, "", "card", "--callable", value))
    add(profiler(USAGE, "", "card", "resnet50", "--seq-len", "128"))
    add(profiler(USAGE, "--image-size", "card", "resnet50", "--image-size", "100000"))
    add(profiler(USAGE, "--seq-len", "card", "gpt2", "--seq-len", str(1 << 40)))
    add(profiler(FAILURE, "cannot write", "card", "resnet50", "--out", "{dir}"))
    add(profiler(USAGE, "", "cleanup", "--provider", "azure"))
    for value in ("nan", "inf", "-1h", "soon", "1e400"):
        add(profiler(USAGE, "", "cleanup", "--provider", "local", "--older-than", value))
    for url in ("ftp://x", "{missing}", "file://{missing}", "file://{binary_bin}", "",
                "s3://", "gs://"):
        add(profiler(USAGE, "", "ingest", url, "--store", "{store}"))
    return found


def cases() -> list[Case]:
    """Every bad input of every command."""
    return [case for part in (recommend_cases, fit_evaluate_cases, data_import_cases,
                              catalog_check_cases, sweep_cases, profiler_cases)
            for case in part()]


TOO_BIG = ("nodes_1000", "nodes_million", "nproc_1000", "batch_huge", "image_huge", "seq_huge",
           "grid_358400")
SPECS = ("utf16", "binary", "list", "scalar", "empty", "bad_yaml", "inf_timeout", "nan_timeout",
         "inf_seconds", "nan_seconds", "inf_tolerance", "inf_cost", "nan_cost", "inf_revoke",
         "inf_lifetime", "nodes_1000", "nodes_million", "nproc_1000", "gpus_1000", "batch_huge",
         "image_huge", "seq_huge", "checkpoint_huge", "grid_358400", "local_p5", "local_gpu",
         "local_spot", "unknown_key", "bad_name", "bad_model", "zero_nodes", "negative_batch",
         "bad_precision", "bad_sink", "bad_provider", "string_nodes", "bool_seconds",
         "revoke_missing_node", "cloud_no_types", "negative_price", "inf_price")
