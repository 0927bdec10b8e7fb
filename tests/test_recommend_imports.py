"""`advisor recommend` runs with torch, the cloud SDKs, pandas and scikit-learn unimportable."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

BLOCKED = ("torch", "google.cloud", "boto3", "botocore", "pandas", "sklearn", "matplotlib")

BLOCKER = f"BLOCKED = {BLOCKED!r}\n" + textwrap.dedent("""
    import sys

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError(name + " is blocked on the recommend path")
            return None

    sys.meta_path.insert(0, Refuse())
""")

MAIN = textwrap.dedent("""
    from advisor.cli import main
    try:
        main()
    finally:
        heavy = {"torch", "pandas", "sklearn", "boto3", "botocore", "matplotlib"}
        print("LOADED", sorted(m for m in sys.modules if m.split(".")[0] in heavy),
              file=sys.stderr)
""")


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_recommend_runs_without_heavy_imports():
    argv = ["advisor", "recommend", "--model", "resnet50", "--deadline", "3d", "--format", "json"]
    result = run(BLOCKER + f"sys.argv = {argv!r}\n" + MAIN)
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stderr
    out = json.loads(result.stdout)
    assert out["pick"]["time_at_confidence_s"] <= 3 * 86400


def test_the_blocker_really_blocks():
    result = run(BLOCKER + "import numpy\nimport pandas\n")
    assert result.returncode != 0 and "pandas is blocked" in result.stderr
