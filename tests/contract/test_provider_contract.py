"""Behaviours every provider must show (see conftest.py for how a provider joins)."""

import time

import pytest

from cloud.provider import (
    FEATURE_GPU,
    FEATURE_INJECT_REVOCATION,
    FEATURE_SPOT,
    SWEEP_LABEL,
    TRIAL_LABEL,
    NodeState,
    ProviderError,
    label_value,
)

GONE = {NodeState.TERMINATED, NodeState.PREEMPTED}


def _wait_for(predicate, wait_s):
    deadline = time.monotonic() + wait_s
    while not (result := predicate()):
        if time.monotonic() > deadline:
            return result
        time.sleep(0.2)
    return result


def test_launch_returns_labelled_nodes(target):
    spec = target.cluster_spec("labels", 2)
    nodes = target.provider.launch(spec)
    assert sorted(n.index for n in nodes) == [0, 1]
    assert len({n.id for n in nodes}) == 2
    for node in nodes:
        assert node.cluster == spec.cluster
        assert node.labels[SWEEP_LABEL] == label_value(spec.sweep)
        assert node.labels[TRIAL_LABEL] == label_value(spec.trial)
        assert node.launched_at is not None and node.launched_at <= time.time()


def test_launching_twice_is_idempotent(target):
    spec = target.cluster_spec("twice", 2)
    first = target.provider.launch(spec)
    second = target.provider.launch(spec)
    assert sorted(n.id for n in first) == sorted(n.id for n in second)
    assert len(target.provider.list(spec.cluster)) == 2


def test_list_reports_running_nodes(target):
    spec = target.cluster_spec("states", 2)
    ids = {n.id for n in target.provider.launch(spec)}
    states = target.provider.list(spec.cluster)
    assert set(states) == ids
    assert all(s in (NodeState.PENDING, NodeState.RUNNING) for s in states.values())
    assert _wait_for(lambda: set(target.provider.list(spec.cluster).values())
                     == {NodeState.RUNNING}, target.wait_s)
    assert target.provider.list("no-such-cluster") == {}


def test_terminate_is_idempotent_and_leaves_nothing(target):
    spec = target.cluster_spec("terminate", 2)
    nodes = target.provider.launch(spec)
    target.provider.terminate(nodes)
    target.provider.terminate(nodes)
    assert all(s in GONE for s in target.provider.list(spec.cluster).values())
    assert not {n.id for n in nodes} & {n.id for n in target.provider.leftovers()}


def test_leftovers_find_labelled_nodes_only(target):
    kept = target.provider.launch(target.cluster_spec("kept", 1))
    ended = target.provider.launch(target.cluster_spec("ended", 1))
    target.provider.terminate(ended)
    found = target.provider.leftovers()
    assert {n.id for n in kept} <= {n.id for n in found}
    assert not {n.id for n in ended} & {n.id for n in found}
    assert all(n.labels.get(SWEEP_LABEL) and n.labels.get(TRIAL_LABEL) for n in found)
    assert not {n.id for n in kept} & {n.id for n in target.provider.leftovers(3600)}


def test_plan_sends_nothing(target):
    spec = target.cluster_spec("plan", 2)
    requests = target.provider.plan(spec)
    assert [r.node for r in requests] == [0, 1]  # node 0 first: the others meet on it
    assert all(r.provider == target.provider.name and r.action for r in requests)
    assert target.provider.list(spec.cluster) == {}
    assert not [n for n in target.provider.leftovers() if n.cluster == spec.cluster]


@pytest.mark.parametrize("feature, call", [
    (FEATURE_SPOT, lambda t: t.provider.launch(t.cluster_spec("spot", 1, spot=True))),
    (FEATURE_GPU, lambda t: t.provider.launch(
        t.cluster_spec("gpu", 1, gpu_type="T4", gpus_per_node=1))),
])
def test_unsupported_launch_features_raise(target, feature, call):
    if target.provider.supports(feature):
        pytest.skip(f"{target.provider.name} supports {feature}")
    with pytest.raises(ProviderError):
        call(target)
    assert target.provider.leftovers() == []


def test_revoke_produces_an_event(target):
    spec = target.cluster_spec("revoke", 2)
    nodes = sorted(target.provider.launch(spec), key=lambda n: n.index)
    if not target.provider.supports(FEATURE_INJECT_REVOCATION):
        with pytest.raises(ProviderError):
            target.provider.revoke(nodes[1])
        return
    target.provider.revoke(nodes[1])
    events = []
    _wait_for(lambda: events.extend(target.provider.poll_events(spec.cluster))
              or any(e.node_id == nodes[1].id for e in events), target.wait_s)
    [event] = [e for e in events if e.node_id == nodes[1].id]
    assert event.kind in ("preempted", "terminated")
    states = target.provider.list(spec.cluster)
    assert states[nodes[1].id] in GONE
    assert states[nodes[0].id] == NodeState.RUNNING
    assert not [e for e in target.provider.poll_events(spec.cluster) if e.node_id == nodes[1].id]
