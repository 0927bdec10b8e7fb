"""benchmarks/coefficient_sensitivity.py: how it groups published rows into sources, and its
refusal of a coefficient the physics has no term for."""

from __future__ import annotations

import json
import sys

import pytest
from script_modules import load_script

SENSITIVITY = load_script("benchmarks/coefficient_sensitivity.py")


def label(**software) -> str:
    return f"published {json.dumps(software, sort_keys=True)}"


def test_each_mlperf_submission_counts_as_one_source_and_a_code_base_as_its_own():
    first = label(code="mlcommons/training_results_v3.1 xFusion/results/G5500V7x8L40",
                  container="MXNet 23.09")
    second = label(code="mlcommons/training_results_v4.0 Dell/results/R760xax4L40S",
                   container="MXNet 23.04")
    nvidia = label(code="NVIDIA/DeepLearningExamples PyTorch/Recommendation/NCF",
                   container="pytorch-21.04 container", framework="PyTorch")
    assert SENSITIVITY.source_of(first) == SENSITIVITY.source_of(second) == SENSITIVITY.MLPERF_CODE
    assert SENSITIVITY.source_of(nvidia) == "NVIDIA/DeepLearningExamples PyTorch/Recommendation/NCF"
    assert SENSITIVITY.source_of(label(container="TF 1.x")) == "TF 1.x"
    assert SENSITIVITY.source_of("published {}") == "uncited"


def test_an_unknown_coefficient_is_refused_before_any_fit(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["coefficient_sensitivity.py", "--coefficients", "fixd"])
    monkeypatch.setattr(SENSITIVITY, "published_rows", lambda: pytest.fail("fitted anyway"))
    with pytest.raises(SystemExit) as exit_info:
        SENSITIVITY.main()
    assert "unknown coefficient fixd" in str(exit_info.value)
    assert "kernel_floor" in str(exit_info.value)
