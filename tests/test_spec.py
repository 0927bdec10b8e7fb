import pytest

from profiler.spec import SpecError, load_spec, parse_spec

SMOKE = {"name": "smoke", "provider": "local", "models": ["resnet18"], "nodes": [1, 2],
         "batch_per_gpu": 16, "image_size": 64, "precision": "fp32", "max_seconds": 60,
         "revocation": {"node": 1, "at_seconds": 20}}


def test_shipped_smoke_spec_expands_to_two_trials():
    spec = load_spec("specs/smoke.yaml")
    trials = spec.trials()
    assert [(t.model, t.nodes) for t in trials] == [("resnet18", 1), ("resnet18", 2)]
    # Node 1 exists only in the 2-node cluster, so only that trial is revoked.
    assert [(t.revoke_node, t.revoke_at) for t in trials] == [(None, None), (1, 5.0)]


def test_grid_is_the_product_of_the_lists_with_stable_unique_keys():
    raw = {**SMOKE, "models": ["resnet18", "mobilenet_v2"], "batch_per_gpu": [8, 16],
           "precision": ["fp32", "bf16"], "revocation": None}
    trials = parse_spec(raw).trials()
    assert len(trials) == 2 * 2 * 2 * 2
    assert len({t.key for t in trials}) == len(trials)
    assert [t.key for t in parse_spec(raw).trials()] == [t.key for t in trials]
    changed = parse_spec({**raw, "max_seconds": 61}).trials()
    assert not {t.key for t in changed} & {t.key for t in trials}


def test_sampled_revocation_times_are_seeded_and_follow_the_mean():
    lifetime = {"distribution": "weibull", "mean_seconds": 30.0, "shape": 2.0}
    raw = {**SMOKE, "nodes": list(range(2, 402)), "max_seconds": 1e6,
           "revocation": {"node": 1, "lifetime": lifetime, "seed": 7}}
    times = [t.revoke_at for t in parse_spec(raw).trials()]
    assert times == [t.revoke_at for t in parse_spec(raw).trials()]
    assert all(t > 0 for t in times)
    assert abs(sum(times) / len(times) - 30.0) < 3.0  # 400 draws: standard error ~0.8 s
    reseeded = parse_spec({**raw, "revocation": {**raw["revocation"], "seed": 8}}).trials()
    assert [t.revoke_at for t in reseeded] != times
    # A node whose drawn lifetime outlasts the measurement is not revoked in that trial.
    short = parse_spec({**raw, "max_seconds": 30}).trials()
    assert all(t.revoke_at is None or t.revoke_at < 30 for t in short)
    assert {t.revoke_node for t in short} == {None, 1}


@pytest.mark.parametrize("change, expected", [
    ({"modles": ["resnet18"]}, "unknown key 'modles'; did you mean 'models'?"),
    ({"revocation": {"nod": 1, "at_seconds": 5}}, "did you mean 'node'?"),
    ({"precision": "fp8"},
     "precision: precision 'fp8' is not known; use one of fp32, tf32, amp, bf16"),
    ({"nodes": [0, 2]}, "nodes: every value must be 1 or more"),
    ({"provider": "gpc"}, "unknown provider 'gpc'; allowed: local, gcp, aws"),
    ({"models": ["resnet181"]}, "models: unknown model 'resnet181'"),
    ({"revocation": {"node": 1}}, "give exactly one of at_seconds or lifetime"),
    ({"revocation": {"node": 2, "at_seconds": 5}}, "revocation.node 2 does not exist"),
    ({"results": "http://x"}, "a sink URL starts with file://, gs://, s3://"),
    ({"provider": "gcp"}, "the gcp provider needs instance_types"),
    ({"name": "Smoke Test"}, "name: use 1-40 lowercase letters"),
    ({"max_seconds": 20}, "revocation.at_seconds 20 must be below max_seconds 20"),
    ({"price_per_hour": -1}, "price_per_hour: Input should be greater than or equal to 0"),
    ({"price_per_hour": float("inf")}, "price_per_hour: Input should be a finite number"),
    ({"price_per_hour": float("nan")}, "price_per_hour: Input should be a finite number"),
    ({"gpus_per_node": 2, "nproc_per_node": 4}, "nproc_per_node 4 is more than gpus_per_node 2"),
])
def test_bad_specs_name_the_field_and_the_fix(change, expected):
    raw = {**SMOKE, **change}
    if "modles" in change:
        del raw["models"]
    with pytest.raises(SpecError) as info:
        parse_spec(raw)
    assert expected in str(info.value)


def test_every_problem_is_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nmodels: [resnet18]\nnodes: [0]\nprecision: fp8\nbogus: 1\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    lines = str(info.value).splitlines()
    assert len(lines) == 3 and all(line.startswith(str(path)) for line in lines)


@pytest.mark.parametrize("text, expected", [
    ("name: [unclosed\n", "is not valid YAML at line"),
    ("- a\n- b\n", "a spec is a YAML mapping"),
])
def test_unreadable_specs(tmp_path, text, expected):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=expected):
        load_spec(path)
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "missing.yaml")


def test_an_explicit_price_reaches_every_trial_and_leaves_the_keys_alone():
    plain = parse_spec(SMOKE).trials()
    priced = parse_spec({**SMOKE, "price_per_hour": 3.06}).trials()
    assert {t.price_per_hour for t in priced} == {3.06} and plain[0].price_per_hour is None
    assert [t.key for t in priced] == [t.key for t in plain]  # the same measurements


def test_a_gpu_node_runs_one_worker_per_gpu_unless_told_otherwise():
    def workers(**fields):
        return {t.nproc_per_node for t in parse_spec({**SMOKE, **fields}).trials()}

    assert workers() == {1}  # CPU: one process a node
    assert workers(gpus_per_node=4) == {4}
    assert workers(gpus_per_node=4, nproc_per_node=2) == {2}
    assert workers(nproc_per_node=3) == {3}  # CPU processes


def test_a_cloud_type_that_comes_with_gpus_trains_on_all_of_them():
    """p4d.24xlarge and a2-highgpu-8g come with 8 GPUs: without gpus_per_node in the spec a
    node still runs a worker on each (it ran one on GPU 0 before), and its trials record 8
    GPUs a node. A GCP N1 host takes the GPU the spec attaches, so it has none unless told;
    one-GPU types keep the trial keys they had."""
    def trials(provider, region, *types, **fields):
        spec = parse_spec({"name": "gpus", "models": ["resnet18"], "provider": provider,
                           "region": region, "instance_types": list(types),
                           "batch_per_gpu": 32, **fields})
        return {t.instance_type: t for t in spec.trials()}

    aws = trials("aws", "us-east-1", "p4d.24xlarge", "g4dn.xlarge")
    assert (aws["p4d.24xlarge"].gpus_per_node, aws["p4d.24xlarge"].nproc_per_node) == (8, 8)
    assert (aws["g4dn.xlarge"].gpus_per_node, aws["g4dn.xlarge"].nproc_per_node) == (1, 1)
    assert aws["g4dn.xlarge"].key == "7b1f5759adcc"  # as before the catalog was consulted
    gcp = trials("gcp", "us-central1", "a2-highgpu-8g", "n1-standard-8")
    assert gcp["a2-highgpu-8g"].nproc_per_node == 8
    assert (gcp["n1-standard-8"].gpus_per_node, gcp["n1-standard-8"].nproc_per_node) == (0, 1)
    assert trials("aws", "us-east-1", "p4d.24xlarge",
                  nproc_per_node=2)["p4d.24xlarge"].nproc_per_node == 2
    with pytest.raises(SpecError, match="nproc_per_node 9 is more than p4d.24xlarge has 8"):
        trials("aws", "us-east-1", "p4d.24xlarge", nproc_per_node=9)


def test_the_shipped_h200_sweep_trials_are_still_the_gpu_specs_own():
    """A later lease resumes specs/gpu-local.yaml from datasets/measurements/h200.json, which
    works only while the spec expands to the same trial keys."""
    import json
    from pathlib import Path

    shipped = json.loads(Path("datasets/measurements/h200.json").read_text())
    keys = {t["trial_key"] for t in shipped if t["sweep"] == "gpu-local"}
    assert len(keys) >= 10 and keys <= {t.key for t in load_spec("specs/gpu-local.yaml").trials()}
