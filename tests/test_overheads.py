"""Overheads and node lifetimes from evidence: cited priors per provider that local
measurements never replace, the whole job waiting out a revocation, Weibull fits of the
digitised CM-DARE lifetime figure, `--explain` naming every source; and quotas: `market`,
`max_gpus` and the fresh-account quota note of each plan."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_physics import config

from advisor import optimizer
from advisor.api import recommend
from advisor.artifact import ArtifactError, load_artifact
from advisor.cli.recommend import render
from advisor.errors import AdvisorError
from advisor.overheads import overhead_priors
from advisor.quotas import load_quotas
from advisor.survival import PREEMPTIBLE_CAP_S, fit_figure, fit_weibull_binned

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "datasets" / "model_artifact.json"


def cited(component: str, provider: str, market: str) -> float:
    with open(ROOT / "datasets" / "overheads.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if (row["component"], row["provider"], row["market"]) == (component, provider,
                                                                       market):
                return float(row["seconds"])
    raise LookupError(component)


def predict(artifact, target, **overrides):
    return artifact.predict(target, config(**overrides))


def test_clouds_get_their_cited_priors_never_the_local_measurements():
    artifact = load_artifact(SHIPPED)
    assert "local" in artifact.doc["startup_s"]["first_step_s"]["groups"]  # measured locally
    first = cited("first_step_s", "*", "*")
    expected = {("gcp", True): cited("vm_s", "gcp", "spot") + first,
                ("gcp", False): cited("vm_s", "gcp", "on-demand") + first,
                ("aws", True): cited("vm_s", "aws", "*") + first}
    for (provider, spot), seconds in expected.items():
        startup = predict(artifact, "startup_s", provider=provider, spot=spot)
        assert startup.value[0] == pytest.approx(seconds)
        assert startup.provenance[0] == "extrapolated"
        recovery = predict(artifact, "recovery_s", provider=provider, spot=spot)
        assert recovery.value[0] == pytest.approx(cited("rejoin_s", "*", "*"))
    # The local provider keeps its own measurements (seconds, not minutes).
    assert predict(artifact, "startup_s", provider="local").value[0] < 60


def test_a_providers_own_measurements_refine_only_that_provider(tmp_path):
    doc = json.loads(SHIPPED.read_text())
    doc["startup_s"]["vm_s"]["groups"]["gcp|1"] = 300.0
    doc["startup_s"]["vm_s"]["counts"]["gcp|1"] = 4
    (tmp_path / "a.json").write_text(json.dumps(doc))
    artifact = load_artifact(tmp_path / "a.json")
    first = cited("first_step_s", "*", "*")
    assert predict(artifact, "startup_s", provider="gcp", spot=True).value[0] == \
        pytest.approx(300.0 + first)
    assert predict(artifact, "startup_s", provider="aws", spot=True).value[0] == \
        pytest.approx(cited("vm_s", "aws", "*") + first)
    sources = artifact.overhead_sources("gcp", "V100", True)
    assert sources["vm_s"] == {"seconds": 300.0,
                               "source": "measured: median of 4 profiler runs (gcp/1)"}
    assert sources["first_step_s"]["source"].startswith("prior: assumption")


def test_a_provider_without_evidence_is_an_error_naming_the_fix(tmp_path):
    doc = json.loads(SHIPPED.read_text())
    doc["startup_s"]["vm_s"]["prior"] = {"gcp|*": {"s": 60.0, "source": "x"}}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="profiler sweep"):
        predict(load_artifact(tmp_path / "a.json"), "startup_s", provider="aws")


def test_every_cited_prior_has_a_source():
    for target, rows in overhead_priors().items():
        assert {"local|*", "*|*"} <= set(rows) or target == "vm_s"
        for row in rows.values():
            assert row["source"] and row["low_s"] <= row["s"] <= row["high_s"]


def test_a_revocation_stalls_the_whole_job_for_the_replacements_start_up(monkeypatch):
    seen = {}

    def spy(group, nodes, work_s, log_speed, checkpoint_s, overhead_s, lifetimes, rng):
        seen.update(nodes=nodes, overhead=overhead_s)
        return simulate(group, nodes, work_s, log_speed, checkpoint_s, overhead_s, lifetimes,
                        rng)

    simulate = optimizer.simulate_spot
    monkeypatch.setattr(optimizer, "simulate_spot", spy)
    result = recommend("resnet50", deadline="24h", providers="gcp", gpus="A100")
    ranking = result.ranking
    spot = ranking["spot"]
    first = cited("first_step_s", "*", "*")
    waits = cited("vm_s", "gcp", "spot") + first + cited("rejoin_s", "*", "*")
    assert len(set(seen["nodes"].tolist())) > 1  # several cluster sizes, one wait
    assert np.allclose(seen["overhead"], waits)
    assert np.allclose(ranking["startup_s"][spot], waits - cited("rejoin_s", "*", "*"))


def test_the_figure_fit_recovers_a_known_weibull_with_the_cap_as_censoring():
    shape, scale = 0.6, 30 * 3600.0
    hours = np.arange(1, 25)
    cdf = 1 - np.exp(-((hours * 3600.0 / scale) ** shape))
    fitted_shape, fitted_scale = fit_weibull_binned([(hours, cdf)])
    assert fitted_shape == pytest.approx(shape, rel=0.02)
    assert fitted_scale == pytest.approx(scale, rel=0.05)


def test_cmdare_regions_fit_front_loaded_curves():
    curves = {row["region"]: row for row in fit_figure()}
    assert set(curves) == {"us-central1", "us-west1", "europe-west1", "us-east1", "*"}
    digitised = {}
    with open(ROOT / "datasets" / "lifetimes_cmdare_figure.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            digitised.setdefault(row["region"], {})[float(row["hour"])] = float(row["cdf"])
    for region, row in curves.items():
        assert row["cap_s"] == PREEMPTIBLE_CAP_S
        assert row["shape"] < 1  # early failures: the hazard falls with age
        if region == "*":
            continue
        for hour in (1.0, 24.0):  # the fit passes near what was read off the figure
            revoked = 1 - math.exp(-((hour * 3600 / row["scale_s"]) ** row["shape"]))
            assert revoked == pytest.approx(digitised[region][hour], abs=0.06), (region, hour)


def test_explain_names_the_source_of_every_overhead_and_of_the_lifetime_curve():
    result = recommend("resnet50", deadline="24h", providers="gcp", gpus="A100")
    explained = result.to_dict(explain=True)["explain"]
    overheads = explained["overheads"]
    for key in ("vm_s", "first_step_s", "rejoin_s", "checkpoint_s"):
        assert overheads[key]["source"].startswith(("prior: ", "measured: ", "fitted: "))
    assert "CM-DARE" in overheads["vm_s"]["source"]
    assert overheads["revocation_wait_s"] == pytest.approx(
        overheads["startup_s"] + overheads["rejoin_s"]["seconds"], abs=0.2)
    lines = "\n".join(render(explained))
    assert "Overheads: start-up" in lines and overheads["vm_s"]["source"] in lines
    risk = explained["revocation_risk"]
    if risk["market"] == "spot":
        life = risk["node_lifetime"]
        assert life["source"] in lines and 0 < life["p_revoked_1h"] < life["p_revoked_24h"] < 1


def test_market_and_max_gpus_restrict_the_plans():
    result = recommend("resnet50", deadline="24h", gpus="A100", market="on-demand",
                       max_gpus=8, top=50)
    assert {plan["market"] for plan in result.plans} == {"on-demand"}
    assert max(plan["gpus_per_node"] * plan["nodes"] for plan in result.plans) <= 8
    cuts = {cut["reason"]: cut["count"] for cut in result.explain()["filtered"]}
    assert cuts["market_filter"] > 0 and cuts["max_gpus"] > 0
    spot = recommend("resnet50", deadline="24h", gpus="A100", market="spot", top=50)
    assert {plan["market"] for plan in spot.plans} == {"spot"}


@pytest.mark.parametrize("arguments, message", [
    ({"market": "cheap"}, "market must be on-demand or spot"),
    ({"max_gpus": 0}, "max_gpus must be at least 1"),
    ({"gpus": "A100", "max_gpus": 1, "market": "spot", "providers": "aws"}, "widen market"),
])
def test_bad_restrictions_name_the_parameter(arguments, message):
    with pytest.raises(AdvisorError, match=message):
        recommend("resnet50", deadline="24h", **arguments)


def test_plans_beyond_a_fresh_accounts_quota_say_so():
    gcp = recommend("resnet50", deadline="24h", providers="gcp", gpus="A100", top=5)
    for plan in gcp.plans:
        gpus = plan["gpus_per_node"] * plan["nodes"]
        assert plan["quota"] == (f"GPUs (all regions) (GPUS_ALL_REGIONS): needs {gpus} GPUs, "
                                 "a fresh account has 0")
    aws = recommend("resnet50", deadline="24h", providers="aws", gpus="A100", top=5)
    for plan in aws.plans:
        kind = "Running On-Demand P instances" if plan["market"] == "on-demand" \
            else "All P Spot Instance Requests"
        assert plan["quota"].startswith(kind) and "vCPUs" in plan["quota"]
    assert all(q.source.startswith("https://") for q in load_quotas())


def test_explain_of_an_on_demand_pick_shows_its_start_up_and_no_revocation_wait():
    result = recommend("resnet50", deadline="24h", gpus="A100", market="on-demand")
    explained = result.explain()
    assert explained["overheads"]["checkpoint_s"]["seconds"] is None  # never checkpoints
    lines = render(explained)
    overhead = [line for line in lines if line.startswith("Overheads")]
    assert overhead == [f"Overheads: start-up {explained['overheads']['startup_s']:.0f} s:"]
    assert not any("rejoin" in line for line in lines)


def test_a_broken_own_copy_of_the_evidence_fails_the_fit_in_one_line(tmp_path, monkeypatch):
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    (home / "overheads.csv").write_text("provider,market,component,seconds,low_s,high_s,"
                                        "as_of,source,notes\ngcp,spot,boot_s,1,1,1,,x,\n")
    monkeypatch.setenv("GPUADVISOR_HOME", str(home))
    from gpuadvisor.store import Store

    with Store(tmp_path / "m.db"):
        pass
    out = subprocess.run([sys.executable, "-c", "from advisor.cli import main; main()", "fit",
                          "--store", str(tmp_path / "m.db"), "--output",
                          str(tmp_path / "a.json")], capture_output=True, text=True)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "boot_s" in out.stderr and str(home) in out.stderr
