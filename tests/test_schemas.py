"""docs/schemas/ holds what the code generates, and real outputs validate against it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from script_modules import load_script

ROOT = Path(__file__).resolve().parent.parent


def writer():
    return load_script("scripts/write_schemas.py")


@pytest.mark.parametrize("name", ["sweep_spec.json", "recommendation.json"])
def test_committed_schemas_are_what_the_code_generates(name):
    module = writer()
    committed = (ROOT / "docs" / "schemas" / name).read_text()
    assert committed == module.text(module.schemas()[name]), \
        "run `python scripts/write_schemas.py` and commit docs/schemas/"


@pytest.mark.parametrize("explain", [False, True])
def test_a_real_recommendation_validates(explain):
    from advisor import recommend

    schema = json.loads((ROOT / "docs" / "schemas" / "recommendation.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for kwargs in ({"deadline": "24h"}, {"budget": 300, "providers": "aws", "epochs": 1}):
        doc = json.loads(json.dumps(recommend("resnet50", **kwargs).to_dict(explain=explain)))
        jsonschema.validate(doc, schema)


def test_the_shipped_specs_validate_against_the_spec_schema():
    schema = json.loads((ROOT / "docs" / "schemas" / "sweep_spec.json").read_text())
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
