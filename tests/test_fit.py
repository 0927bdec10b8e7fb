"""Fitting: recovers known physics, extrapolates to an unseen GPU, survival with censoring,
checkpoints, determinism, and the `advisor fit` command."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from advisor import physics
from advisor.artifact import SCHEMA_VERSION, load_artifact
from advisor.features import gpu_features, gpu_link_gb_s, to_arrays
from advisor.fitting import fit_checkpoint, fit_store
from advisor.survival import fit_weibull
from gpuadvisor.store import Store

MODELS = {  # name: (params, flops per sample, activation bytes per sample)
    "small": (1e6, 0.5e9, 5e6), "mid": (10e6, 4e9, 40e6), "big": (60e6, 20e9, 120e6),
    "wide": (100e6, 8e9, 20e6), "deep": (5e6, 10e9, 200e6),
}
# Known physics, each coefficient 0.7-1.6x its prior (as real GPUs sit about their priors).
# MODELS are cards without the operator split: their FLOPs are the `unsplit_*` terms' work.
TRUE = {**physics.PRIOR, "unsplit_fp32": 4.0, "unsplit_tensor": 4.0, "memory": 1.0,
        "fixed": 0.01, "allreduce_inter": 0.8}


FIT_COMMAND = [sys.executable, "-c", "from advisor.cli import main; main()", "fit"]


def row(model, gpu, nodes, per_node, precision, batch=64):
    params, flops, activation = MODELS[model]
    return dict(model=model, params=params, flops_per_sample=flops, gradient_bytes=4 * params,
                activation_bytes=activation, gpu=gpu, nodes=nodes, gpus_per_node=per_node,
                network_gbps=25.0, sync="allreduce", ps_count=1, batch_per_gpu=batch,
                precision=precision, provider="aws", spot=False, **gpu_features(gpu),
                intra_node_gb_s=gpu_link_gb_s(gpu, None))  # as trial features build it


def true_throughput(rows, truth=TRUE):
    features = to_arrays(rows)
    return physics.cluster_throughput(features, physics.step_time(features, truth))


def synthetic_store(path, gpus=("K80", "T4", "V100", "A100-40GB"), truth=TRUE):
    rows = [row(m, g, n, k, p) for m in MODELS for g in gpus for n in (1, 2, 4)
            for k in (1, 4) for p in ("fp32", "amp")]
    with Store(path) as store:
        store.add_rows("models", [{"model": m, "params": int(v[0]), "flops_per_sample": v[1],
                                   "gradient_bytes": int(4 * v[0]), "activation_bytes": v[2],
                                   "source": "test"} for m, v in MODELS.items()])
        for r, thr in zip(rows, true_throughput(rows, truth)):
            store.add_trial({
                "trial_key": f"{r['model']}-{r['gpu']}-{r['nodes']}-{r['gpus_per_node']}-"
                             f"{r['precision']}", "status": "finished", "source": "local",
                "provider": "aws", "gpu_type": r["gpu"], "nodes": r["nodes"],
                "gpus_per_node": r["gpus_per_node"], "sync": "allreduce", "ps_count": 1,
                "model": r["model"], "batch_per_gpu": 64, "precision": r["precision"],
                "throughput": float(thr), "extra": {"network_gbps": 25.0}})
    return rows


def test_fit_recovers_known_physics_and_extrapolates_to_an_unseen_gpu(tmp_path):
    synthetic_store(tmp_path / "m.db")
    doc, info = fit_store(tmp_path / "m.db")
    assert info["skipped"] == {}
    assert doc["training_data"]["throughput_configs"] == 5 * 4 * 3 * 2 * 2
    path = tmp_path / "a.json"
    path.write_text(json.dumps(doc))
    artifact = load_artifact(path)
    unseen = [row(m, "H100-80GB", n, 8, p) for m in MODELS for n in (1, 4) for p in ("fp32", "amp")]
    predicted = artifact.predict("throughput", to_arrays(unseen))
    error = np.abs(predicted.value / true_throughput(unseen) - 1)
    assert error.max() < 0.05
    assert set(predicted.provenance) == {"extrapolated"}
    assert np.all(predicted.lo < predicted.value) and np.all(predicted.value < predicted.hi)


def test_a_card_without_the_split_may_reach_its_units_peak_and_moves_no_gemm_term():
    # Whole models at 80% of the FP32 peak: above the ~35% prior, below the datasheet bound.
    from advisor.fitting import fit_throughput_core

    truth = {**physics.PRIOR, "unsplit_fp32": 1.25, "fixed": 0.001}
    rows = [row(m, g, 1, 1, "fp32", batch) for m in MODELS for g in ("K80", "P100", "V100")
            for batch in (32, 128)]
    features = to_arrays(rows)
    throughput = physics.cluster_throughput(features, physics.step_time(features, truth))
    fitted = fit_throughput_core(features, throughput)["coefficients"]
    assert fitted["unsplit_fp32"] == pytest.approx(1.25, rel=0.05)
    assert fitted["compute_fp32"] == pytest.approx(physics.PRIOR["compute_fp32"])


def test_fit_is_deterministic(tmp_path):
    synthetic_store(tmp_path / "m.db", gpus=("T4", "V100"))
    first, _ = fit_store(tmp_path / "m.db")
    second, _ = fit_store(tmp_path / "m.db")
    first.pop("fitted_at"), second.pop("fitted_at")
    assert first == second


def test_weibull_fit_with_censoring_recovers_shape_and_scale():
    rng = np.random.default_rng(1)
    life = 7200 * rng.weibull(0.7, 3000)
    observed_until = rng.uniform(0, 20000, 3000)  # observation ends before some revocations
    shape, scale = fit_weibull(np.minimum(life, observed_until), life <= observed_until)
    assert shape == pytest.approx(0.7, rel=0.08)
    assert scale == pytest.approx(7200, rel=0.1)
    # Ignoring the censoring would bias the life short: the fit must not.
    _, naive_scale = fit_weibull(np.minimum(life, observed_until), np.ones(3000))
    assert naive_scale < 0.8 * scale


def test_checkpoint_time_is_fixed_cost_plus_bytes_over_bandwidth():
    rows = [{"model": f"m{i}", "params": b / 8, "bytes": b, "target": "bucket",
             "save_s": 2.0 + b / 50e6} for i, b in enumerate([1e6, 1e7, 1e8, 5e8])]
    spec = fit_checkpoint(rows)
    assert spec["bytes_per_param"] == 8
    bucket = spec["targets"]["bucket"]
    assert bucket["fixed_s"] == pytest.approx(2.0, rel=1e-3)
    assert bucket["s_per_byte"] == pytest.approx(1 / 50e6, rel=1e-3)
    assert spec["targets"]["local"]["n"] == 0  # no local rows: the prior stays


def test_fit_lifetimes_and_overheads_from_the_store(tmp_path):
    rng = np.random.default_rng(2)
    with Store(tmp_path / "m.db") as store:
        store.add_rows("lifetimes", [
            {"provider": "gcp", "region": "us-east1", "gpu_type": "T4", "spot": 1,
             "lifetime_s": float(t), "revoked": 1, "source": "test"}
            for t in 3600 * rng.weibull(1.5, 200)])
        store.add_rows("startups", [
            {"provider": "gcp", "gpu_type": "T4", "spot": 1, "provisioning_s": 2.0,
             "staging_s": 40.0 + i, "booting_s": 30.0, "first_step_s": 20.0, "source": "test"}
            for i in range(12)])
    doc, _ = fit_store(tmp_path / "m.db")
    path = tmp_path / "a.json"
    path.write_text(json.dumps(doc))
    artifact = load_artifact(path)
    life = artifact.lifetime("gcp", "T4", "us-east1", spot=True)
    assert life.shape == pytest.approx(1.5, rel=0.15) and "fitted" in life.source
    assert artifact.lifetime("gcp", "V100", "us-east1", spot=True).source.startswith("fitted")
    features = to_arrays([row("small", "T4", 1, 1, "fp32") | {"provider": "gcp", "spot": True}])
    startup = artifact.predict("startup_s", features)
    assert startup.value[0] == pytest.approx(2 + 45.5 + 30 + 20)
    assert startup.provenance[0] == "measured"


def test_fit_command_writes_an_artifact_and_fails_cleanly(tmp_path):
    synthetic_store(tmp_path / "m.db", gpus=("T4",))
    out = subprocess.run([*FIT_COMMAND, "--store", str(tmp_path / "m.db"), "--output",
                          str(tmp_path / "a.json"), "--format", "json"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["throughput_configs"] == 60
    assert json.loads(out.stdout)["coefficients_at_bound"] == []
    assert "physical bound" not in out.stderr and "fitting the models" not in out.stderr
    assert load_artifact(tmp_path / "a.json").doc["schema_version"] == SCHEMA_VERSION
    missing = subprocess.run([*FIT_COMMAND, "--store", str(tmp_path / "none.db")],
                             capture_output=True, text=True, check=False)
    assert missing.returncode == 2
    assert missing.stderr.startswith("error: no measurement store") and "Traceback" not in \
        missing.stderr


def test_fit_command_shows_a_bar_on_a_terminal_and_none_elsewhere(tmp_path):
    """Fitting takes seconds to a minute: on a terminal stderr carries a transient bar; piped,
    stderr stays clean (test_fit_command_writes_an_artifact_and_fails_cleanly)."""
    import os
    import pty
    import threading

    synthetic_store(tmp_path / "m.db", gpus=("T4",))
    master, terminal = pty.openpty()
    seen = bytearray()

    def read() -> None:  # the terminal must be drained, or a long bar blocks the command
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the command closed its end
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    out = subprocess.run([*FIT_COMMAND, "--store", str(tmp_path / "m.db"), "--output",
                          str(tmp_path / "a.json"), "--format", "json"],
                         stdout=subprocess.PIPE, stderr=terminal, text=True, check=False)
    os.close(terminal)
    reader.join(timeout=10)
    os.close(master)
    assert out.returncode == 0
    assert json.loads(out.stdout)["throughput_configs"] == 60
    shown = seen.decode(errors="replace")
    assert "fitting the models on m.db" in shown and "━" in shown  # the pulsing bar
    assert re.search(r"\d:\d\d:\d\d", shown)  # and the time it has taken


def test_fit_command_warns_of_a_coefficient_on_its_physical_bound(tmp_path):
    """Trials whose FP32 work ran twice as fast as the datasheet peak allows: the fit pins that
    coefficient on its bound (and the memory term, which can no longer take up the rest), and
    `advisor fit` says so on stderr, a line a term, and in its JSON."""
    synthetic_store(tmp_path / "m.db", gpus=("T4", "V100"),
                    truth={**TRUE, "unsplit_fp32": 0.5})
    out = subprocess.run([*FIT_COMMAND, "--store", str(tmp_path / "m.db"), "--output",
                          str(tmp_path / "a.json"), "--format", "json"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["coefficients_at_bound"] == ["unsplit_fp32", "memory"]
    warnings = [line for line in out.stderr.splitlines() if "physical bound" in line]
    assert len(warnings) == 2
    assert warnings[0].startswith("warning: coefficient unsplit_fp32 = 1.00 is on its physical "
                                  "bound (the datasheet peak)")
    assert "(the datasheet DRAM bandwidth)" in warnings[1]


def test_ps_tensor_prior_is_chosen_on_the_training_data_only():
    from advisor.fitting import fit_throughput

    tensors = {"small": 20, "mid": 60, "big": 160, "wide": 40, "deep": 300}
    rows = [row(m, g, n, 1, "fp32") | {"sync": "ps", "tensors": tensors[m]}
            for m in MODELS for g in ("T4", "V100") for n in (1, 2, 4, 8)]
    features = to_arrays(rows)
    # Servers that spend 1 ms a tensor and worker, ten times the fallback prior.
    truth = {**TRUE, "ps_server_tensor": 1e-3}
    measured = physics.cluster_throughput(features, physics.step_time(features, truth))
    spec = fit_throughput(features, measured, {})
    assert spec["priors"]["values"]["ps_server_tensor"] == 1e-3
    assert spec["priors"]["chosen_by"]["ps_server_tensor"] == "inner leave-one-model-out"
    assert spec["coefficients"]["ps_server_tensor"] == pytest.approx(1e-3, rel=0.05)
    # All-reduce data never exercise the term: the stated physics prior stays, and says so.
    allreduce = [row(m, "T4", n, 1, "fp32") for m in MODELS for n in (1, 2)]
    spec = fit_throughput(to_arrays(allreduce), true_throughput(allreduce), {})
    assert spec["priors"]["values"]["ps_server_tensor"] == physics.PRIOR["ps_server_tensor"]
    assert spec["priors"]["chosen_by"]["ps_server_tensor"].startswith("physics prior")


def test_a_software_stack_effect_is_fitted_apart_from_the_physics():
    from advisor.fitting import fit_throughput_core

    rows = [row(m, g, n, k, p) for m in MODELS for g in ("T4", "V100", "A100-40GB")
            for n in (1, 2) for k in (1, 4) for p in ("fp32", "amp")]
    truth = true_throughput(rows)
    # One stack's kernels 30% faster, on rows drawn at random (not confounded with a feature).
    fast = np.random.default_rng(0).permutation(len(rows)) < len(rows) // 2
    # Stacks as `software_label` names them: the source, then the recorded software.
    mxnet = 'published {"container": "fast", "framework": "MXNet"}'
    tensorflow = 'published {"container": "slow", "framework": "TensorFlow"}'
    pytorch = 'published {"container": "pytorch-21.03 container", "framework": "PyTorch"}'
    features = {**to_arrays(rows), "software": np.where(fast, mxnet, tensorflow)}
    core = fit_throughput_core(features, np.where(fast, 1.3, 1.0) * truth)
    for unit in set(physics.arithmetic_unit(features)):
        assert (stack_effect(core, mxnet, unit) - stack_effect(core, tensorflow, unit)
                == pytest.approx(np.log(1.3), abs=0.01)), unit
    # Without a PyTorch stack the physics fits the average one (the offsets' row-weighted
    # mean is 0): as one stack measuring every row at the geometric mean of the two would.
    features.pop("software")
    average = fit_throughput_core(features, truth * np.sqrt(1.3))["coefficients"]
    for name, value in average.items():  # a host factor takes a share of a stack's effect
        host_term = physics.TERMS.index(name) in physics.HOST_TERMS
        assert core["coefficients"][name] == pytest.approx(value, rel=0.05 if host_term
                                                           else 0.02), name
    # With one, the physics describes the PyTorch stack: the one `recommend` prices.
    features["software"] = np.where(fast, mxnet, pytorch)
    core = fit_throughput_core(features, np.where(fast, 1.3, 1.0) * truth)
    for unit in set(physics.arithmetic_unit(features)):
        assert stack_effect(core, pytorch, unit) == pytest.approx(0.0, abs=1e-3), unit
    assert core["host_effects"][pytorch] == pytest.approx(0.0, abs=1e-3)
    features.pop("software")
    plain = fit_throughput_core(features, truth)["coefficients"]
    for name, value in plain.items():
        host_term = physics.TERMS.index(name) in physics.HOST_TERMS
        assert core["coefficients"][name] == pytest.approx(value, rel=0.05 if host_term
                                                           else 0.02), name


def stack_effect(core, stack, unit):
    """A fitted stack's log effect on throughput on one arithmetic unit: its own (its
    framework's included) and its own on that unit."""
    return core["software_effects"][stack] + core["unit_effects"].get(f"{stack}|{unit}", 0.0)


def test_a_stack_is_slow_on_one_unit_without_bending_that_units_physics():
    """A stack whose mixed-precision recipe leaves work in FP32 (TensorFlow's Transformer-XL
    in AMP) is slow on tensor cores alone: its effect there is its own, and the 16-bit
    efficiency the other stacks share stays where their rows put it."""
    from advisor.fitting import fit_throughput_core

    rows = [row(m, g, n, 1, p) for m in MODELS for g in ("V100", "A100-40GB")
            for n in (1, 2) for p in ("fp32", "amp")]
    truth = true_throughput(rows)
    pytorch = 'published {"container": "pytorch-21.03 container", "framework": "PyTorch"}'
    tensorflow = 'published {"container": "tensorflow-20.06-tf1 container", "framework": "TF"}'
    features = to_arrays(rows)
    slow = np.arange(len(rows)) // 2 % 2 == 0  # half of each precision's rows
    half = features["precision"] == "amp"
    features["software"] = np.where(slow, tensorflow, pytorch)
    plain = fit_throughput_core(features, truth)
    core = fit_throughput_core(features, np.where(slow & half, 1 / 1.5, 1.0) * truth)
    assert stack_effect(core, tensorflow, "tensor16") == pytest.approx(-np.log(1.5), abs=0.05)
    # Its effect on every unit takes a share (each effect is pulled to 0 alike), which its
    # effects on the other units give back, within the prior rows' pull.
    for unit in ("fp32", "tf32"):
        assert abs(stack_effect(core, tensorflow, unit)) < 0.1, unit
    for unit in ("fp32", "tf32", "tensor16"):
        assert stack_effect(core, pytorch, unit) == pytest.approx(0.0, abs=1e-3), unit
    # One effect per stack for every unit bent the 16-bit efficiency by 21% and the FP32 one
    # by 14% here; the prior rows' pull on the nested effects leaves a few percent.
    for name, value in plain["coefficients"].items():
        assert core["coefficients"][name] == pytest.approx(value, rel=0.05), name


def test_an_unseen_stacks_spread_holds_the_stacks_effects_on_each_unit():
    """Ten stacks of one framework, each as fast as the next in FP32 and 0.74x or 1.35x in
    AMP: an unseen stack may land anywhere in that range on tensor cores, so its spread is the
    effects' on each unit, not the stacks' own effects (which take only a share of them)."""
    from advisor.fitting import fit_throughput_core

    rows = [row(m, g, n, 1, p) for m in MODELS for g in ("V100", "A100-40GB")
            for n in (1, 2) for p in ("fp32", "amp")]
    features = to_arrays(rows)
    stack = np.arange(len(rows)) // 2 % 10
    features["software"] = np.array([f'published {{"container": "c{k}", "framework": "PyTorch"}}'
                                     for k in stack])
    effect = np.where(stack % 2 == 0, 0.3, -0.3) * (features["precision"] == "amp")
    core = fit_throughput_core(features, np.exp(effect) * true_throughput(rows))
    # Each stack's host factor takes a share too, where the fixed cost is much of a step.
    assert core["software_spread"]["within_framework"] > 0.2
    assert max(abs(v) for v in core["software_effects"].values()) < 0.25  # the stacks' own


def test_a_stack_is_a_code_base_in_a_container():
    """Two code bases in one container (NVIDIA's TensorFlow ConvNets and Transformer-XL) are
    two stacks; the models of one code base (ConvNets' ResNet-50 and EfficientNet READMEs)
    share one, and so do the runs of one training loop (the profiler's, CM-DARE's)."""
    from advisor.fitting import software_label

    def published(path, container="tensorflow-20.06-tf1 container"):
        return software_label({
            "source": "published", "software": {"container": container, "framework": "TF"},
            "extra": {"citation": f"published: NVIDIA/DeepLearningExamples {path}@74e943ed; "
                                  "batch: a config"}})

    convnets = published("TensorFlow/Classification/ConvNets/resnext101-32x4d/README.md")
    assert convnets == published("TensorFlow/Classification/ConvNets/resnet50v1.5/README.md")
    assert convnets != published("TensorFlow/LanguageModeling/Transformer-XL/README.md")
    assert convnets != published("TensorFlow/Classification/ConvNets/resnext101-32x4d/README.md",
                                 "tensorflow-20.12-tf1 container")
    assert '"code": "NVIDIA/DeepLearningExamples TensorFlow/Classification/ConvNets"' in convnets
    runs = [{"source": "local", "software": {"torch": "2.11"}, "model": m, "extra": {}}
            for m in ("resnet50", "vit_b16")]
    assert software_label(runs[0]) == software_label(runs[1]) == 'local {"torch": "2.11"}'


def test_a_new_container_of_a_code_base_inherits_what_its_containers_share():
    """Two containers of one code base both slow in AMP (a recipe of the code, not of the
    container): the code base's effect there takes the larger share of it, and a third
    container of that code, never seen, is priced with it instead of the framework's."""
    from advisor.artifact import Artifact, code_label
    from advisor.fitting import fit_throughput_core

    rows = [row(m, g, n, 1, p) for m in MODELS for g in ("V100", "A100-40GB")
            for n in (1, 2) for p in ("fp32", "amp")]
    truth = true_throughput(rows)

    def stack(code, container, framework):
        return (f'published {{"code": "{code}", "container": "{container}", '
                f'"framework": "{framework}"}}')

    old, new = stack("TF/Slow", "tf-20.06", "TF"), stack("TF/Slow", "tf-21.03", "TF")
    plain = stack("PyTorch/Plain", "pytorch-21.03", "PyTorch")
    features = to_arrays(rows)
    half = features["precision"] == "amp"
    which = np.arange(len(rows)) % 3
    features["software"] = np.choose(which, [old, new, plain])
    core = fit_throughput_core(features, np.where((which < 2) & half, 1 / 1.5, 1.0) * truth)
    slow_code = code_label(old)
    assert slow_code == code_label(new) != code_label(plain)
    unseen = stack("TF/Slow", "tf-22.01", "TF")
    # The code base's hosts apart (test_a_code_bases_slow_hosts_take_their_own_fixed_cost...).
    doc = {"throughput": {**core, "seen": {"configs": {}, "model_gpu": {}},
                          "calibration": {"extrapolated": [-0.1, 0.1]}, "host_effects": {}}}
    amp_rows = {k: v[half] for k, v in features.items()}

    def log_ratio_to_plain(software):
        named = Artifact(doc).predict("throughput", {**amp_rows, "software": np.full(
            int(half.sum()), software)}).value
        return np.log(named / Artifact(doc).predict("throughput", {**amp_rows, "software": (
            np.full(int(half.sum()), plain))}).value)

    shared = core["code_effects"][slow_code] + core["code_unit_effects"][f"{slow_code}|tensor16"]
    assert np.allclose(log_ratio_to_plain(unseen), shared - stack_effect(core, plain, "tensor16"))
    # Every level is pulled to 0 alike, so what the two containers share (their code base's
    # effect, their framework's) takes most of their slowdown; the framework alone, all that
    # a new container got before, leaves most of it out.
    seen = np.mean([log_ratio_to_plain(s) for s in (old, new)])
    assert seen == pytest.approx(-np.log(1.5), abs=0.1)
    assert np.all(log_ratio_to_plain(unseen) < 0.6 * seen)
    assert core["framework_effects"]["tf"] > 0.3 * seen


def test_a_new_code_base_in_a_known_years_container_gets_that_years_effect():
    """Two code bases whose 2021 containers run 1.4x faster than their 2019 ones (newer
    cuDNN and cuBLAS): the year takes the shared part, so a third code base, never seen, in a
    2021 container is priced faster than the reference, and one in a year never seen is not."""
    from advisor.artifact import Artifact, release_label
    from advisor.fitting import fit_throughput_core

    rows = [row(m, g, n, 1, "amp") for m in MODELS for g in ("V100", "A100-40GB")
            for n in (1, 2)]
    truth = true_throughput(rows)

    def stack(code, container):
        return (f'published {{"code": "{code}", "container": "{container} container", '
                f'"framework": "PyTorch"}}')

    stacks = [stack(code, container) for code in ("PyTorch/A", "PyTorch/B")
              for container in ("pytorch-19.05", "pytorch-21.03")]
    assert release_label(stacks[1]) == release_label(stacks[3]) == "pytorch 2021"
    assert release_label('local {"torch": "2.11"}') is None

    def container(name):
        return release_label('published ' + json.dumps({"container": name,
                                                        "framework": "PyTorch"}))
    # However a source spells an NGC container's year and month; never a version number.
    assert container("nvcr.io/nvidia/pytorch:22.09-py3") == "pytorch 2022"
    assert container("NGC PyTorch 23.04, 8 GPUs") == "pytorch 2023"
    assert {container("pytorch 1.12.1"), container("MLPerf v2.1 preview")} == {None}
    features = to_arrays(rows)
    which = np.arange(len(rows)) % 4
    features["software"] = np.array(stacks)[which]
    core = fit_throughput_core(features, np.where(which % 2 == 1, 1.4, 1.0) * truth)
    assert core["release_effects"]["pytorch 2021"] - core["release_effects"]["pytorch 2019"] \
        > 0.3 * np.log(1.4)  # each level pulled to 0 alike: the two years share the gap
    doc = {"throughput": {**core, "seen": {"configs": {}, "model_gpu": {}},
                          "calibration": {"extrapolated": [-0.1, 0.1]}}}

    def log_effect(software):
        named = Artifact(doc).predict("throughput", {**features, "software": np.full(
            len(rows), software)}).value
        reference = {k: v for k, v in features.items() if k != "software"}
        return np.log(named / Artifact(doc).predict("throughput", reference).value)

    new_code = log_effect(stack("PyTorch/C", "pytorch-21.07"))
    assert np.allclose(new_code, core["framework_effects"].get("pytorch", 0.0)
                       + core["release_effects"]["pytorch 2021"])
    assert np.all(new_code > 0.15 * np.log(1.4))
    assert np.allclose(log_effect(stack("PyTorch/C", "pytorch-24.01")),
                       core["framework_effects"].get("pytorch", 0.0))


def test_a_stack_that_skips_card_work_never_sets_the_reference():
    from advisor.fitting import fit_throughput_core, reference_stacks

    rows = [row(m, g, n, 1, "amp") for m in MODELS for g in ("T4", "V100", "A100-40GB")
            for n in (1, 2)]
    truth = true_throughput(rows)
    pytorch = 'published {"container": "pytorch-21.11 container", "framework": "PyTorch"}'
    binned = ('published {"container": "pytorch-21.11 container with LDDL sequence binning '
              '(phase 2, bin size 64)", "framework": "PyTorch"}')
    assert reference_stacks(np.array([pytorch, binned])).tolist() == [True, False]
    # Half the rows ran on binned sequences, doing 40% less work: the padded stack stays the
    # reference and the binned one carries (most of) the saving ...
    binned_rows = np.arange(len(rows)) % 2 == 0
    measured = np.where(binned_rows, 1 / 0.6, 1.0) * truth
    features = {**to_arrays(rows), "software": np.where(binned_rows, binned, pytorch)}
    core = fit_throughput_core(features, measured)
    assert stack_effect(core, pytorch, "tensor16") == pytest.approx(0.0, abs=1e-3)
    assert stack_effect(core, binned, "tensor16") > 0.7 * np.log(1 / 0.6)
    # ... where, as a plain PyTorch stack, it would pull the reference halfway to its speed.
    plain = 'published {"container": "pytorch-22.01 container", "framework": "PyTorch"}'
    features["software"] = np.where(binned_rows, plain, pytorch)
    assert stack_effect(fit_throughput_core(features, measured), pytorch, "tensor16") < -0.15


def test_group_held_out_spreads_bound_the_size_of_an_error_not_its_sign():
    from advisor.fitting import conformal, conformal_symmetric

    # Five held-out GPUs, every one predicted too slow: the next may be too fast by as much.
    residual = np.repeat([0.1, 0.2, 0.3, 0.4, 0.5], 20)
    low, high = conformal_symmetric(residual)
    assert low == -high and high == pytest.approx(0.5)
    assert conformal(residual)[0] > 0  # the two-tailed form would exclude any over-prediction


def test_no_fitted_efficiency_passes_the_datasheet_peak():
    from advisor.fitting import fit_throughput_core

    rows = [row(m, g, n, 1, "amp") for m in MODELS for g in ("T4", "V100", "A100-40GB")
            for n in (1, 2)]
    features = to_arrays(rows)
    # Rows 2x faster than the GEMMs at the tensor peak: no fit may explain them by a faster
    # unit.
    too_fast = 2 * physics.cluster_throughput(
        features, physics.step_time(features, {**TRUE, "compute_tensor": 1.0, "memory": 1.0}))
    coefficients = fit_throughput_core(features, too_fast)["coefficients"]
    assert coefficients["compute_tensor"] >= 1.0 and coefficients["memory"] >= 1.0
    assert coefficients["conv_tensor"] >= physics.RELATIVE_EFFICIENCY["conv"]


def test_the_closed_form_jacobian_fits_as_finite_differences_do(monkeypatch):
    import scipy.optimize

    from advisor.fitting import fit_throughput_core

    rows = [row(m, g, n, k, p) for m in MODELS for g in ("K80", "V100", "A100-40GB")
            for n in (1, 4) for k in (1, 8) for p in ("fp32", "amp")]
    rng = np.random.default_rng(1)
    stacks = rng.choice(['published {"framework": "MXNet", "container": "a"}',
                         'published {"framework": "MXNet", "container": "b"}',
                         'published {"framework": "PyTorch", "container": "c"}'], len(rows))
    features = {**to_arrays(rows), "software": stacks}
    measured = true_throughput(rows) * np.exp(rng.normal(0, 0.2, len(rows)))
    closed = fit_throughput_core(features, measured)
    least_squares = scipy.optimize.least_squares
    monkeypatch.setattr(scipy.optimize, "least_squares",
                        lambda *args, jac=None, **kwargs: least_squares(*args, **kwargs))
    numeric = fit_throughput_core(features, measured)
    for name, value in numeric["coefficients"].items():
        assert closed["coefficients"][name] == pytest.approx(value, rel=1e-4), name
    for name, value in numeric["software_effects"].items():
        assert closed["software_effects"][name] == pytest.approx(value, abs=1e-4), name


def test_calibration_holds_many_models_out_in_a_bounded_number_of_folds(monkeypatch):
    """Nested in every outer fold of an evaluation, one inner fit per model made its cost grow
    with the square of the models: past INNER_GROUP_FOLDS models they share folds."""
    from advisor import fitting

    rows = [row(m, g, n, 1, "amp") for m in MODELS for g in ("T4", "V100", "A100-40GB", "H100")
            for n in (1, 2, 4)]
    features = to_arrays(rows)
    features["model"] = np.array([f"net{i % 12}" for i in range(len(rows))])  # 12 models
    held_out = {}  # axis: the groups each inner fold held out

    def record(features, throughput, splitter, groups=None, priors=None, kernel=None):
        for axis in ("model", "gpu"):
            if groups is not None and np.array_equal(groups, features[axis]):
                held_out[axis] = [sorted(set(groups[test])) for _, test in
                                  splitter.split(throughput, groups=groups)]
        return np.zeros(len(throughput))

    monkeypatch.setattr(fitting, "out_of_fold", record)
    fitting.novel_spreads(features, true_throughput(rows), None)
    # 12 models in INNER_GROUP_FOLDS folds (one fit a fold, not one a model), each held out
    # once; 4 GPUs one at a time.
    assert len(held_out["model"]) == fitting.INNER_GROUP_FOLDS == 10
    assert sorted(m for fold in held_out["model"] for m in fold) == sorted(set(features["model"]))
    assert sorted(held_out["gpu"]) == [["A100-40GB"], ["H100"], ["T4"], ["V100"]]


def test_ridge_penalty_is_the_one_leave_one_model_out_refits_choose():
    """The batched solve (every fold's sums as the whole data's less its model's) picks the
    penalty that refitting sklearn's Ridge without each model in turn picks."""
    from sklearn.linear_model import Ridge

    from advisor.fitting import RIDGE_ALPHAS, ridge_alpha

    rng = np.random.default_rng(1)
    chosen = set()
    for _ in range(12):
        n, k = int(rng.integers(40, 200)), int(rng.integers(1, 6))
        z = rng.normal(size=(n, k))
        models = rng.integers(0, int(rng.integers(3, 12)), n).astype(str)
        residual = z @ rng.normal(size=k) * rng.uniform(0, 0.3) + rng.normal(size=n)
        errors = [sum(np.abs(Ridge(alpha=alpha).fit(z[models != m], residual[models != m])
                             .predict(z[models == m]) - residual[models == m]).sum()
                      for m in np.unique(models)) for alpha in RIDGE_ALPHAS]
        expected = RIDGE_ALPHAS[int(np.argmin(errors))]
        assert ridge_alpha(z, residual, models) == expected
        chosen.add(expected)
    assert len(chosen) >= 2  # the data leave the choice open: not one penalty always


def test_terms_at_their_bound_are_named():
    """A coefficient on its physical bound (a unit at its datasheet peak, a convolution at its
    stated relative efficiency of it) is named; one above it, or a term without a bound, is
    not. The shipped fit has none."""
    from advisor.fitting import terms_at_bound

    priced = dict(physics.PRIOR, compute_tensor=1.0, conv_tf32=0.7, memory=1.01, fixed=0.0)
    assert terms_at_bound(priced) == ["compute_tensor", "conv_tf32"]
    assert terms_at_bound(physics.PRIOR) == []
    assert terms_at_bound(load_artifact().doc["throughput"]["coefficients"]) == []


def test_a_code_bases_slow_hosts_take_their_own_fixed_cost_and_dispatch():
    """One code base's benchmarks ran on hosts 3x slower (cloud notebooks: the step's Python
    and each kernel's dispatch take 3x as long): its host factor takes that, the fixed cost
    the other code base's rows show stays the shared coefficient, and a new container of the
    slow code is priced on its hosts while a row that names no stack is priced on the
    reference host."""
    from advisor.artifact import Artifact, code_label
    from advisor.fitting import fit_throughput_core

    rows = [row(m, g, n, 1, p, batch=b) for m in MODELS for g in ("V100", "A100-40GB")
            for n in (1, 2) for p in ("fp32", "amp") for b in (4, 64)]
    features = to_arrays(rows)

    def stack(code, container, framework="PyTorch"):
        return (f'published {{"code": "{code}", "container": "{container}", '
                f'"framework": "{framework}"}}')

    # The PyTorch stack is the reference, whose host the physics describes.
    slow = stack("Notebook/Bench", "nb-2020", "TensorFlow")
    fast = stack("PyTorch/Plain", "pytorch-21.03")
    on_slow = np.arange(len(rows)) % 2 == 0
    features["software"] = np.where(on_slow, slow, fast)
    scale = np.where(on_slow, 3.0, 1.0)
    truth = physics.cluster_throughput(features, physics.step_time(features, TRUE, scale))
    core = fit_throughput_core(features, truth)
    hosts = core["host_effects"]
    assert hosts[code_label(slow)] > 0.5 * np.log(3.0)  # pulled towards 0, as every effect
    assert hosts[code_label(fast)] == pytest.approx(0.0, abs=1e-3)
    assert core["coefficients"]["fixed"] == pytest.approx(TRUE["fixed"], rel=0.35)
    doc = {"throughput": {**core, "seen": {"configs": {}, "model_gpu": {}},
                          "calibration": {"extrapolated": [-0.1, 0.1]}}}
    reference = {k: v for k, v in features.items() if k != "software"}
    named = {**reference, "software": np.full(len(rows), stack("Notebook/Bench", "nb-2021",
                                                               "TensorFlow"))}
    without_hosts = {**doc["throughput"], "host_effects": {}}
    on_its_hosts = Artifact(doc).step_time(named) / Artifact(
        {"throughput": without_hosts}).step_time(named)
    factor = np.exp(hosts[code_label(slow)])
    assert np.allclose(on_its_hosts, physics.step_time(reference, core["coefficients"], np.full(
        len(rows), factor)) / physics.step_time(reference, core["coefficients"]))
    assert np.all(on_its_hosts > 1.0)
    assert Artifact(doc).step_time(reference) == pytest.approx(
        Artifact({"throughput": without_hosts}).step_time(reference))
