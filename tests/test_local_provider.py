"""The local provider beyond the contract suite: agent configs, the whole process tree of a
node (torchrun starts workers in sessions of their own), replacements, crash recovery."""

import dataclasses
import json
import sys
import time

import psutil
import pytest

from cloud.local import NODE_ID_ENV, LocalProvider
from cloud.provider import (
    LAUNCHED_AT,
    LAUNCHED_AT_MS,
    RDZV_PORT,
    ClusterSpec,
    NodeState,
    ProviderError,
    fill,
)

# An agent that starts a child in a session of its own (as torchrun does with its workers),
# writes the child's pid next to its config, and sleeps.
TREE_AGENT = (sys.executable, "-c", """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         start_new_session=True)
open(sys.argv[2] + ".child", "w").write(str(child.pid))
time.sleep(120)
""")


@pytest.fixture
def provider(tmp_path):
    provider = LocalProvider(state_dir=tmp_path / "state", agent_command=TREE_AGENT,
                             term_grace_s=2.0)
    yield provider
    provider.terminate(provider.leftovers())


def _spec(nodes=2, trial="t1"):
    return ClusterSpec(sweep="s", trial=trial, nodes=nodes, instance_type="local-cpu",
                       agent_config={"worker": {"model": "resnet18"}})


def _child(provider, node):
    path = provider.state_dir / node.cluster / f"agent-{node.index}.json.child"
    deadline = time.monotonic() + 10
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, "the agent never started its child"
        time.sleep(0.1)
    return psutil.Process(int(path.read_text()))


def test_agent_configs_share_one_rendezvous_endpoint(provider):
    nodes = provider.launch(_spec())
    configs = [json.loads((provider.state_dir / n.cluster / f"agent-{n.index}.json").read_text())
               for n in nodes]
    assert [c["node"] for c in configs] == [0, 1]
    assert {c["nodes"] for c in configs} == {2}
    [endpoint] = {c["rdzv_endpoint"] for c in configs}
    assert endpoint.startswith("127.0.0.1:") and int(endpoint.split(":")[1]) > 0
    assert all(c["worker"] == {"model": "resnet18"} for c in configs)
    assert all(c["launched_at"] == n.launched_at for c, n in zip(configs, nodes))


def test_launch_spawns_exactly_the_planned_requests(provider):
    spec = _spec()
    planned = provider.plan(spec)
    nodes = provider.launch(spec)
    cluster_dir = provider.state_dir / spec.cluster
    port = json.loads((cluster_dir / "cluster.json").read_text())["port"]
    for request, node in zip(planned, nodes, strict=True):
        # What the launch learns as it goes: the time it spawns, the cluster's port.
        sent = fill(request.body, {LAUNCHED_AT: node.launched_at, RDZV_PORT: port,
                                   LAUNCHED_AT_MS: int(node.launched_at * 1000)})
        record = json.loads((cluster_dir / f"node-{node.index}.json").read_text())
        process = psutil.Process(record["pid"])
        assert process.cmdline() == sent["command"]
        assert sent["env"].items() <= process.environ().items()
        assert json.loads((cluster_dir / f"agent-{node.index}.json").read_text()) == sent["config"]
        assert sent["env"][NODE_ID_ENV] == node.id


def test_revoke_kills_the_whole_tree_and_launch_replaces_the_node(provider):
    spec = _spec()
    nodes = provider.launch(spec)
    child = _child(provider, nodes[1])
    assert child.environ()[NODE_ID_ENV] == nodes[1].id
    provider.revoke(nodes[1])
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    assert provider.list(spec.cluster)[nodes[1].id] == NodeState.PREEMPTED
    with pytest.raises(ProviderError, match="not running"):
        provider.revoke(dataclasses.replace(nodes[1], id="other"))
    replaced = provider.launch(spec)
    assert replaced[0].id == nodes[0].id and replaced[1].id != nodes[1].id
    events = provider.poll_events(spec.cluster)
    assert [(e.node_id, e.kind) for e in events] == [(nodes[1].id, "preempted")]
    assert events[0].detail["cause"] == "sigkill"
    assert provider.list(spec.cluster) == {nodes[0].id: NodeState.RUNNING,
                                           replaced[1].id: NodeState.RUNNING}


def test_terminate_reaches_children_in_their_own_sessions(provider):
    nodes = provider.launch(_spec(nodes=1))
    child = _child(provider, nodes[0])
    provider.terminate(nodes)
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    assert provider.leftovers() == []


def test_a_node_that_exits_is_reported_once(tmp_path):
    provider = LocalProvider(state_dir=tmp_path, agent_command=(sys.executable, "-c", "pass"))
    spec = _spec(nodes=1)
    [node] = provider.launch(spec)
    deadline = time.monotonic() + 10
    while not (events := provider.poll_events(spec.cluster)):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert [(e.node_id, e.kind, e.detail["exit_code"]) for e in events] == [
        (node.id, "terminated", 0)]
    assert provider.poll_events(spec.cluster) == []
    assert provider.list(spec.cluster) == {node.id: NodeState.TERMINATED}


def test_another_process_finds_and_cleans_up_leftovers(provider):
    nodes = provider.launch(_spec(trial="crashed"))
    children = [_child(provider, n) for n in nodes]
    after_crash = LocalProvider(state_dir=provider.state_dir, term_grace_s=2.0)
    found = after_crash.leftovers()
    assert sorted(n.id for n in found) == sorted(n.id for n in nodes)
    assert after_crash.list(nodes[0].cluster) == {n.id: NodeState.RUNNING for n in nodes}
    after_crash.terminate(found)
    assert provider.leftovers() == []
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)


def test_plan_writes_nothing(tmp_path):
    provider = LocalProvider(state_dir=tmp_path / "state")
    requests = provider.plan(_spec())
    assert [r.node for r in requests] == [0, 1]
    assert requests[0].body["command"][-2:] == [
        "--config", str(tmp_path / "state" / "s-t1" / "agent-0.json")]
    assert not (tmp_path / "state").exists()


def test_spot_is_refused_with_the_fix(tmp_path):
    provider = LocalProvider(state_dir=tmp_path)
    spot = ClusterSpec(sweep="s", trial="t", nodes=1, instance_type="local-cpu", spot=True)
    with pytest.raises(ProviderError, match="no spot market; set spot: false"):
        provider.launch(spot)


def test_a_revocation_is_reported_even_after_terminate_and_relaunch(provider):
    """The orchestrator's order: revoke, clean up the lost node, launch its replacement."""
    spec = _spec()
    nodes = provider.launch(spec)
    before = time.time()
    provider.revoke(nodes[1])
    after = time.time()
    provider.terminate([nodes[1]])
    provider.launch(spec)
    events = [e for e in provider.poll_events(spec.cluster) if e.node_id == nodes[1].id]
    assert [e.kind for e in events] == ["preempted"]
    assert before <= events[0].at <= after


def _gpu_provider(tmp_path, monkeypatch, visible):
    from cloud.provider import FEATURE_GPU

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    provider = LocalProvider(state_dir=tmp_path / "state")
    provider.unsupported = provider.unsupported - {FEATURE_GPU}  # as on a GPU machine
    return provider


def test_each_local_gpu_node_gets_gpus_of_its_own(tmp_path, monkeypatch):
    provider = _gpu_provider(tmp_path, monkeypatch, "3,5,7,9")
    spec = dataclasses.replace(_spec(nodes=2), gpus_per_node=2)
    assert [r.body["env"]["CUDA_VISIBLE_DEVICES"] for r in provider.plan(spec)] == ["3,5", "7,9"]
    one = dataclasses.replace(_spec(nodes=1), gpus_per_node=1)
    assert provider.plan(one)[0].body["env"]["CUDA_VISIBLE_DEVICES"] == "3"
    assert "CUDA_VISIBLE_DEVICES" not in provider.plan(_spec(nodes=1))[0].body["env"]


def test_more_local_gpus_than_the_machine_shows_is_refused_in_one_line(tmp_path, monkeypatch):
    provider = _gpu_provider(tmp_path, monkeypatch, "0,1,2")
    spec = dataclasses.replace(_spec(nodes=2), gpus_per_node=2)
    with pytest.raises(ProviderError) as err:
        provider.plan(spec)
    assert "need 4 GPUs" in str(err.value) and "shows 3 (0, 1, 2)" in str(err.value)
    assert "\n" not in str(err.value)
