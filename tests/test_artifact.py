"""The artifact predictor: numpy only, vectorised, provenance, errors, lifetimes, and the
shipped artifact is exactly what `advisor fit` makes from the shipped data."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_physics import candidate as physics_candidate

from advisor.artifact import Artifact, ArtifactError, code_label, framework, load_artifact
from advisor.features import to_arrays
from advisor.fitting import fit_store

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "datasets" / "model_artifact.json"

BLOCKED_PREDICT = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"pandas", "sklearn", "scipy", "torch", "transformers"}:
            raise ImportError("blocked " + name)
sys.meta_path.insert(0, Block())
import numpy as np
from advisor.artifact import load_artifact
from advisor.features import gpu_features, to_arrays
row = dict(model="resnet50", params=25.6e6, flops_per_sample=12.3e9, gradient_bytes=102e6,
           activation_bytes=100e6, gpu="A100-40GB", nodes=2, gpus_per_node=8,
           network_gbps=100.0, sync="allreduce", ps_count=1, batch_per_gpu=256,
           precision="amp", provider="gcp", spot=True, **gpu_features("A100-40GB"))
features = to_arrays([row] * 100_000)
art = load_artifact()
for target in ("throughput", "startup_s", "checkpoint_s", "recovery_s"):
    p = art.predict(target, features)
    assert p.value.shape == p.lo.shape == p.hi.shape == p.provenance.shape == (100_000,)
    assert np.all(p.lo <= p.value) and np.all(p.value <= p.hi) and np.all(p.value > 0)
life = art.lifetime("aws", "A100-40GB", "us-east-1", True)
assert life.sample(np.random.default_rng(0), 10).shape == (10,)
print("ok")
"""


def candidate(**overrides):
    resnet50 = dict(model="resnet50", params=25.6e6, flops_per_sample=12.3e9,
                    gradient_bytes=102e6, activation_bytes=100e6, gpus_per_node=8,
                    batch_per_gpu=256, precision="amp")
    return physics_candidate(**resnet50 | overrides)


def test_predict_needs_neither_pandas_nor_sklearn_nor_scipy():
    out = subprocess.run([sys.executable, "-c", BLOCKED_PREDICT], capture_output=True, check=False,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_shipped_artifact_is_what_fit_makes_from_the_shipped_data(tmp_path):
    out = tmp_path / "rebuilt.json"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "build_artifact.py"), "--output",
                    str(out)], check=True, cwd=ROOT, capture_output=True)
    shipped, rebuilt = json.loads(SHIPPED.read_text()), json.loads(out.read_text())
    for doc in (shipped, rebuilt):
        doc.pop("fitted_at"), doc.pop("library_versions")
    assert same_document(rebuilt, shipped), "datasets/model_artifact.json is stale: run " \
        "scripts/build_artifact.py"


def same_document(a, b) -> bool:
    """Equal JSON documents, floats to 1e-6 relative: the artifact rounds fits to 8 significant
    digits, and another CPU's BLAS can move the last one."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_document(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same_document, a, b))
    if isinstance(a, float) or isinstance(b, float):
        return a == pytest.approx(b, rel=1e-6, abs=1e-12)
    return a == b


def test_measured_configurations_answer_with_their_measurements(tmp_path):
    from gpuadvisor.store import Store

    with Store(tmp_path / "m.db") as store:
        store.add_rows("models", [{"model": "net", "params": 10_000_000,
                                   "flops_per_sample": 2e9, "gradient_bytes": 40_000_000,
                                   "activation_bytes": 3e7, "source": "test"}])
        for throughput in (900.0, 1000.0, 1100.0):
            store.add_trial({"trial_key": "a", "status": "finished", "source": "local",
                             "provider": "gcp", "gpu_type": "T4", "nodes": 1,
                             "gpus_per_node": 1, "sync": "allreduce", "ps_count": 1,
                             "model": "net", "batch_per_gpu": 32, "precision": "fp32",
                             "throughput": throughput})
    doc, _ = fit_store(tmp_path / "m.db")
    (tmp_path / "a.json").write_text(json.dumps(doc))
    artifact = load_artifact(tmp_path / "a.json")
    base = dict(model="net", params=1e7, flops_per_sample=2e9, gradient_bytes=4e7,
                activation_bytes=3e7, gpu="T4", gpus_per_node=1, precision="fp32",
                batch_per_gpu=32, ps_count=0)  # all-reduce has no parameter servers
    p = artifact.predict("throughput", to_arrays([
        candidate(**base), candidate(**base | {"nodes": 4}), candidate(**base | {"gpu": "L4"})]))
    # The measured median, within the measurements' range widened to the calibrated spread
    # of a measured configuration (a repeat elsewhere varies by more than one run's spread).
    spread = artifact.doc["throughput"]["calibration"]["measured"]
    assert p.value[0] == 1000.0
    assert p.lo[0] == pytest.approx(min(900.0, 1000.0 * np.exp(spread[0])))
    assert p.hi[0] == pytest.approx(max(1100.0, 1000.0 * np.exp(spread[1])))
    assert p.provenance.tolist() == ["measured", "extrapolated", "extrapolated"]


def test_bad_artifacts_give_errors_that_name_the_fix(tmp_path):
    with pytest.raises(ArtifactError, match="advisor fit"):
        load_artifact(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        load_artifact(tmp_path / "bad.json")
    (tmp_path / "old.json").write_text(json.dumps({"schema_version": 0}))
    with pytest.raises(ArtifactError, match="schema"):
        load_artifact(tmp_path / "old.json")
    with pytest.raises(ArtifactError, match="unknown target"):
        load_artifact(SHIPPED).predict("speed", to_arrays([candidate()]))


# A hand-edited artifact whose throughput section has a wrong type where prediction reads it:
# refused on load, naming the key, instead of a traceback in the middle of a prediction.
WRONG_SHAPES = [
    (("software_effects",), "fast", "a mapping at throughput.software_effects"),
    (("unit_effects",), "fast", "a mapping at throughput.unit_effects"),
    (("coefficients", "memory"), "1.9", "a number at throughput.coefficients.memory"),
    (("coefficients",), [1.0, 2.0], "a mapping at throughput.coefficients"),
    (("correction", "coef"), ["x"], "a number at throughput.correction.coef.0"),
    (("calibration", "extrapolated"), [0.4], "pair at throughput.calibration.extrapolated"),
    (("calibration", "ceiling"), None, "lacks throughput.calibration.ceiling"),
    (("coefficients", "memory"), None, "lacks throughput.coefficients.memory"),
    (("seen",), "x", "a mapping at throughput.seen"),
    (("anchors", "length_scale"), "long", "a number at throughput.anchors.length_scale"),
    (("anchors", "cells"), [], "a mapping at throughput.anchors.cells"),
]


@pytest.mark.parametrize("keys, value, message", WRONG_SHAPES, ids=lambda v: str(v)[:30])
def test_a_throughput_section_of_the_wrong_shape_is_refused_on_load(tmp_path, keys, value,
                                                                     message):
    doc = json.loads(SHIPPED.read_text())
    load_artifact(SHIPPED).predict("throughput", to_arrays([candidate()]))  # well-formed
    part = doc["throughput"]
    for key in keys[:-1]:
        part = part[key]
    if value is None:
        del part[keys[-1]]
    else:
        part[keys[-1]] = value
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match=re.escape(message)) as raised:
        load_artifact(tmp_path / "edited.json")
    assert "advisor fit" in str(raised.value)


def test_an_anchoring_cell_with_a_weight_too_few_is_refused_on_load(tmp_path):
    doc = json.loads(SHIPPED.read_text())
    key, cell = next(iter(doc["throughput"]["anchors"]["cells"].items()))
    cell["weights"].pop()
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match=re.escape(f"throughput.anchors.cells.{key}")):
        load_artifact(tmp_path / "edited.json")


def test_lifetimes_follow_the_published_curves_and_stated_priors():
    artifact = load_artifact(SHIPPED)
    on_demand = artifact.lifetime("gcp", "V100", "us-central1", spot=False)
    assert math.isinf(on_demand.scale_s) and np.all(np.isinf(on_demand.sample(
        np.random.default_rng(0), 3)))
    # A region of CM-DARE's figure has its own curve; Spot VMs drop the preemptible cap.
    spot = artifact.lifetime("gcp", "V100", "us-central1", spot=True)
    preemptible = artifact.lifetime("gcp", "V100", "us-central1", spot=True, preemptible=True)
    assert spot.source.startswith("published") and "no 24 h cap" in spot.source
    assert math.isinf(spot.cap_s) and preemptible.cap_s == 86400
    assert (spot.shape, spot.scale_s) == (preemptible.shape, preemptible.scale_s)
    assert preemptible.survival([86400])[0] == 0 and spot.survival([86400])[0] > 0
    assert preemptible.sample(np.random.default_rng(0), 10_000).max() <= 86400
    # Elsewhere the curve fitted on all the figure's regions, no cap, said so.
    pooled = next(r for r in artifact.doc["lifetime"]["figure"] if r["region"] == "*")
    elsewhere = artifact.lifetime("gcp", "V100", "asia-east1", spot=True)
    assert (elsewhere.shape, elsewhere.scale_s) == (pooled["shape"], pooled["scale_s"])
    assert math.isinf(elsewhere.cap_s) and "outside the regions" in elsewhere.source
    # AWS without a Spot Advisor bucket: the same order as GCP, a stated assumption...
    aws = artifact.lifetime("aws", "V100", "nowhere-1", spot=True)
    assert (aws.shape, aws.scale_s) == (pooled["shape"], pooled["scale_s"])
    assert aws.source.startswith("prior: assumption")
    # ... and with one, the bucket's exponential life (>20% of capacity reclaimed a month).
    bucket = artifact.lifetime("aws", "V100", "us-east-1", spot=True, interruption_bucket=">20%")
    assert bucket.shape == 1.0
    assert bucket.scale_s == pytest.approx(30 * 86400 / -math.log(1 - 0.25), rel=1e-6)


def test_a_mixed_batch_predicts_as_each_row_alone():
    """The factorized lookups (codes shared across targets) give every row what it would get
    on its own, whatever the mix of GPUs, providers, markets and precisions."""
    artifact = load_artifact(SHIPPED)
    rng = np.random.default_rng(0)
    rows = [candidate(gpu=str(rng.choice(["V100", "A100-40GB", "T4", "L4"])),
                      provider=str(rng.choice(["gcp", "aws", "local"])),
                      spot=bool(rng.integers(2)), nodes=int(rng.integers(1, 5)),
                      precision=str(rng.choice(["amp", "fp32", "TF32"])),
                      model=str(rng.choice(["resnet50", "bert_large"]))) for _ in range(40)]
    batch = to_arrays(rows)
    for target in ("throughput", "startup_s", "checkpoint_s", "recovery_s"):
        together = artifact.predict(target, batch)
        for i, row in enumerate(rows):
            alone = artifact.predict(target, to_arrays([row]))
            assert together.value[i] == pytest.approx(alone.value[0], rel=1e-12)
            assert (together.lo[i], together.hi[i]) == pytest.approx((alone.lo[0], alone.hi[0]))
            assert together.provenance[i] == alone.provenance[0]


def test_no_prediction_or_interval_passes_the_gpus_peak():
    from advisor import physics

    artifact = load_artifact()
    far = [physics_candidate(model="unseen", gpu="H100-80GB", precision="bf16", nodes=n,
                             gpus_per_node=8, flops_per_sample=flops, batch_per_gpu=1)
           for n, flops in ((1, 1e9), (8, 1e12), (64, 1e15))]
    features = to_arrays(far)
    p = artifact.predict("throughput", features)
    bound = physics.peak_throughput(features)
    assert np.all(p.lo <= p.value) and np.all(p.value <= p.hi) and np.all(p.hi <= bound)


def test_a_known_software_stack_prices_as_it_was_fitted_and_recommend_names_none():
    """`advisor evaluate` names the stack that measured a held-out row: its fitted effect
    applies (else its code base's, else its framework's, where 2 or more of the framework's
    stacks were seen);
    `recommend` names none and gets the reference (PyTorch) stack."""
    doc = json.loads(SHIPPED.read_text())
    effects = doc["throughput"]["software_effects"]
    fast = max(effects, key=effects.get)
    artifact = load_artifact(SHIPPED)
    row = physics_candidate(model="unseen", gpu="V100", precision="amp")
    reference = artifact.predict("throughput", to_arrays([row])).value[0]
    named = {**to_arrays([row]), "software": np.array([fast])}
    on_tensor_cores = doc["throughput"]["unit_effects"].get(f"{fast}|tensor16", 0.0)
    # Its code base's hosts run the step's Python at their own pace (`host_effects`).
    hostless = Artifact({**doc, "throughput": {**doc["throughput"], "host_effects": {}}})
    assert hostless.predict("throughput", named).value[0] == pytest.approx(
        reference * math.exp(effects[fast] + on_tensor_cores))
    from advisor import physics

    host = doc["throughput"]["host_effects"].get(code_label(fast) or fast, 0.0)
    coefficients = doc["throughput"]["coefficients"]
    assert artifact.step_time(named)[0] / hostless.step_time(named)[0] == pytest.approx(
        physics.step_time(named, coefficients, np.exp([host]))[0]
        / physics.step_time(named, coefficients)[0])
    # A new MLPerf submission gets what the MLPerf submissions of its framework share; any
    # other new MXNet code what MXNet's stacks outside MLPerf share (NVIDIA's ResNet-50 in
    # its 18.12, 19.07 and 20.12 containers), never MLPerf's.
    mlperf = doc["throughput"]["framework_effects"]["mxnet (mlperf)"]
    plain = doc["throughput"]["framework_effects"]["mxnet"]
    assert plain != mlperf
    for code, effect in (("mlcommons/training_results_v9.0 NVIDIA/results/x", mlperf),
                         ("someone/benchmarks mxnet/resnet", plain)):
        unseen = {**to_arrays([row]), "software": np.array([
            'published ' + json.dumps({"code": code, "container": "mxnet-99.01",
                                       "framework": "MXNet"})])}
        assert artifact.predict("throughput", unseen).value[0] == pytest.approx(
            reference * math.exp(effect))
    # A new container of a code base the fit saw gets that code base's effects (its
    # framework's included), on every unit and on this one.
    convnets = 'NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets'
    unseen_container = (f'published {{"code": "{convnets}", "container": "pytorch-99.01", '
                        '"framework": "PyTorch"}')
    code = code_label(unseen_container)
    new_container = {**to_arrays([row]), "software": np.array([unseen_container])}
    throughput = doc["throughput"]
    assert code in throughput["code_effects"]
    assert hostless.predict("throughput", new_container).value[0] == pytest.approx(
        reference * math.exp(throughput["code_effects"][code]
                             + throughput["code_unit_effects"].get(f"{code}|tensor16", 0.0)))
    unknown = {**to_arrays([row]), "software": np.array(["local {\"jax\": \"0.4\"}"])}
    assert artifact.predict("throughput", unknown).value[0] == pytest.approx(reference)


def test_a_stack_never_fitted_widens_the_interval_by_the_stacks_spread():
    """A row measured by an unseen stack carries its framework's effect, or the reference's,
    and its own effect is a draw from the fitted stacks' spread: the interval widens by it, in
    quadrature, the more where even the framework is new; a seen stack, or none, does not."""
    doc = json.loads(SHIPPED.read_text())
    spread = doc["throughput"]["software_spread"]
    assert 0 < spread["within_framework"] <= spread["any"]
    artifact = load_artifact(SHIPPED)
    row = to_arrays([physics_candidate(model="unseen", gpu="V100", precision="amp")])
    seen = next(iter(doc["throughput"]["software_effects"]))

    def log_half_widths(software=None):
        p = artifact.predict("throughput", row if software is None
                             else {**row, "software": np.array([software])})
        return np.log(p.value[0] / p.lo[0]), np.log(p.hi[0] / p.value[0])

    base = log_half_widths()
    assert log_half_widths(seen) == pytest.approx(base)
    new_version = log_half_widths('published {"container": "tf-99.01", "framework": "TensorFlow"}')
    new_framework = log_half_widths('local {"jax": "0.4"}')
    # MXNet outside MLPerf has stacks of its own (three containers of NVIDIA's ResNet-50): a
    # new MXNet code is a new stack of a known framework, not as new as jax
    new_mxnet = log_half_widths('published {"container": "mxnet-99.01", "framework": "MXNet"}')
    for q, widths in ((spread["within_framework"], new_version), (spread["any"], new_framework),
                      (spread["within_framework"], new_mxnet)):
        assert widths == pytest.approx([math.hypot(b, q) for b in base])


def test_the_stacks_spread_is_taken_around_their_framework_where_it_has_several():
    from advisor.fitting import software_effect_spread

    # stack offsets (log step time): ten PyTorch stacks around their framework, one MXNet
    offsets = np.array([0.1, -0.1] * 5 + [-0.5])
    framework_of_stack = np.array([0] * 10 + [1])
    shared = np.array([0.0, -0.5])
    spread = software_effect_spread(offsets, shared, framework_of_stack)
    assert spread["within_framework"] == pytest.approx(0.1)
    assert spread["any"] == pytest.approx(0.5)
    assert software_effect_spread(np.zeros(1), np.zeros(0), np.zeros(1, int)) == {}


def test_too_few_stacks_for_the_level_never_narrow_an_unseen_stack_below_the_stated_spread():
    """Two or three fitted stacks (one lab's and the profiler's) cannot bound where a 90%
    share of unseen stacks lands: split conformal needs 9 scores for that. Below that the
    stated extrapolation spread is the floor; from 9 on, the stacks' own bound."""
    from advisor.fitting import DEFAULT_SPREAD, fewest_for_level, group_spread

    assert fewest_for_level(0.1) == 9 and fewest_for_level(0.5) == 1
    stated = DEFAULT_SPREAD["extrapolated"]
    assert group_spread(np.array([0.05, -0.1])) == pytest.approx(stated)
    assert group_spread(np.array([0.05, -0.9])) == pytest.approx(0.9)  # wider stays wider
    nine = np.linspace(-0.2, 0.2, 9)
    assert group_spread(nine) == pytest.approx(0.2)
    # Three stacks, each on three units, are nine effects but three stacks' evidence.
    assert group_spread(nine, groups=3) == pytest.approx(stated)
    from advisor.fitting import software_effect_spread

    spread = software_effect_spread(nine, np.zeros(1), np.zeros(9, int), np.array([3]))
    assert spread == {"any": pytest.approx(stated), "within_framework": pytest.approx(stated)}


def test_an_arithmetic_unit_never_trained_on_widens_the_interval():
    doc = json.loads(SHIPPED.read_text())
    units = doc["throughput"]["seen"]["units"]
    assert set(units) == {"tensor16", "tf32", "fp32"}  # the shipped data ran on all three
    row = physics_candidate(model="unseen", gpu="V100", precision="amp")
    wide = doc["throughput"]["calibration"]["novel"]["unit"]
    narrow = json.loads(json.dumps(doc))
    narrow["throughput"]["seen"]["units"] = ["tensor16"]
    seen_unit = Artifact(narrow).predict("throughput", to_arrays([row]))
    narrow["throughput"]["seen"]["units"] = ["fp32"]
    new_unit = Artifact(narrow).predict("throughput", to_arrays([row]))
    assert new_unit.value[0] == pytest.approx(seen_unit.value[0])
    assert new_unit.hi[0] / new_unit.lo[0] > seen_unit.hi[0] / seen_unit.lo[0]
    assert wide[1] > 0 > wide[0]


def test_a_code_label_names_the_code_base_and_framework_of_a_stack():
    """Two containers of one code base share a code label, which `framework` reads as their
    framework (recorded, or inferred from the versions recorded); a stack naming no code base
    (the profiler's, CM-DARE's) has none."""
    def stack(container, **more):
        return "published " + json.dumps({"code": "NVIDIA/DLE MxNet/RN50v1.5",
                                          "container": container, **more}, sort_keys=True)

    old, new = stack("mxnet-20.12", framework="MXNet"), stack("mxnet-22.04", framework="MXNet")
    assert code_label(old) == code_label(new) is not None
    assert framework(code_label(old)) == framework(old) == "mxnet"
    assert framework(code_label(stack("c", mxnet="1.9"))) == "mxnet"  # inferred, then kept
    assert code_label('local {"torch": "2.11"}') is None
    assert code_label("published not json") is None
    # an MLPerf Training submission's framework is its framework's MLPerf family
    submission = "published " + json.dumps({"code": "mlcommons/training_results_v4.0 x/y",
                                            "framework": "MXNet"})
    assert framework(submission) == framework(code_label(submission)) == "mxnet (mlperf)"
