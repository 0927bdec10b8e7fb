"""Write the JSON Schemas of docs/schemas/ from the code: the sweep spec (from the pydantic
models of profiler/spec.py) and `advisor recommend --format json` (advisor/schema.py).
tests/test_schemas.py checks that the committed files are what this writes.

    python scripts/write_schemas.py
"""

from __future__ import annotations

import json
from pathlib import Path

SCHEMAS = Path(__file__).resolve().parent.parent / "docs" / "schemas"


def schemas() -> dict[str, dict]:
    from advisor.schema import recommendation_schema
    from profiler.spec import spec_schema

    return {"sweep_spec.json": spec_schema(),
            "recommendation.json": recommendation_schema()}


def text(schema: dict) -> str:
    return json.dumps(schema, indent=2) + "\n"


def main() -> None:
    for name, schema in schemas().items():
        (SCHEMAS / name).write_text(text(schema))
        print(f"wrote {SCHEMAS / name}")


if __name__ == "__main__":
    main()
