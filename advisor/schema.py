"""JSON Schema (draft 2020-12) of `advisor recommend --format json`, that is of
`advisor.api.Recommendation.to_dict()`; `advisor recommend --schema` prints it and
docs/schemas/recommendation.json is that output (tests keep the two equal)."""

from __future__ import annotations

from advisor.reasons import Reason

NUMBER = {"type": "number"}
NULLABLE_NUMBER = {"type": ["number", "null"]}
STRING = {"type": "string"}


def _object(properties: dict, required: list | None = None, extra: bool = False) -> dict:
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required,
            "additionalProperties": extra}


PLAN = _object({
    "rank": {"type": "integer", "minimum": 1},
    "provider": STRING, "region": STRING, "instance_type": STRING, "gpu": STRING,
    "gpus_per_node": {"type": "integer", "minimum": 1},
    "nodes": {"type": "integer", "minimum": 1},
    "shape": STRING,
    "market": {"enum": ["spot", "on-demand"]},
    "price_per_node_hour": NUMBER,
    "throughput": NUMBER, "throughput_lo": NUMBER, "throughput_hi": NUMBER,
    "time_p50_s": NUMBER, "time_p90_s": NUMBER, "cost_p50": NUMBER, "cost_p90": NUMBER,
    "time_at_confidence_s": NUMBER, "cost_at_confidence": NUMBER,
    "p_deadline": NULLABLE_NUMBER, "p_budget": NULLABLE_NUMBER,
    "startup_s": NUMBER,
    "revocations_expected": NUMBER,
    "checkpoint_interval_s": NULLABLE_NUMBER,
    "provenance": {"enum": ["measured", "interpolated", "extrapolated"]},
    "quota": {"type": ["string", "null"]},
    "micro_batch": {"type": "integer", "minimum": 1},
    "accumulation": {"type": "integer", "minimum": 1},
    "global_batch": {"type": "integer", "minimum": 1},
    "remedy": {"enum": ["none", "accumulation", "checkpointing", "fsdp",
                        "fsdp+checkpointing"]},
    "remedy_slowdown": {"type": "number", "minimum": 0},
    "memory_mib": NUMBER, "gpu_memory_mib": NUMBER,
})

CUT = _object({
    "reason": {"enum": [reason.value for reason in Reason]},
    "count": {"type": "integer", "minimum": 0},
    "gpu": STRING, "need_mib": NUMBER, "gpu_memory_mib": NUMBER, "confidence": NUMBER,
}, required=["reason", "count"])

EXPLAIN = _object({
    "step": {"type": ["object", "null"], "required": ["seconds", "shares"]},
    "measured_by": {"type": ["string", "null"]},
    "scaling": {"type": "array", "items": _object({
        "nodes": {"type": "integer"}, "throughput": NUMBER, "speedup": NUMBER,
        "marginal_efficiency": NULLABLE_NUMBER, "worth_adding": {"type": "boolean"}})},
    "scaling_threshold": NUMBER,
    "overheads": {"type": ["object", "null"],
                  "required": ["startup_s", "vm_s", "first_step_s", "rejoin_s",
                               "checkpoint_s", "revocation_wait_s"]},
    "revocation_risk": {"type": ["object", "null"],
                        "properties": {"market": {"enum": ["spot", "on-demand"]}},
                        "required": ["market", "revocations_expected"]},
    "filtered": {"type": "array", "items": CUT},
})


def recommendation_schema() -> dict:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/gpu-advisor/gpu-advisor/docs/schemas/recommendation.json",
        "title": "advisor recommend --format json",
        "description": "Ranked cluster plans for a training workload, best first; `pick` is "
                       "the first. Times in seconds, costs and prices in USD.",
        **_object({
            "pick": PLAN,
            "plans": {"type": "array", "items": PLAN, "minItems": 1},
            "workload": _object({"model": STRING, "dataset": STRING,
                                 "batch_per_gpu": {"type": "integer"},
                                 "global_batch": {"type": "integer"},
                                 "batch_policy": {"enum": ["fixed-global", "fixed-per-gpu"]},
                                 "precision": STRING, "optimizer": STRING},
                                extra=True),  # with samples_per_epoch and epochs, or steps
            "constraints": _object({"deadline_s": NULLABLE_NUMBER,
                                    "budget_usd": NULLABLE_NUMBER,
                                    "confidence": {"type": "number", "exclusiveMinimum": 0,
                                                   "exclusiveMaximum": 1}}),
            "assumptions": {"type": "object"},
            "catalog": _object({"as_of": {"type": "string", "format": "date"},
                                "candidates": {"type": "integer", "minimum": 0}}),
            "artifact": _object({"schema_version": {"type": ["integer", "null"]},
                                 "fitted_at": {"type": ["string", "null"]}}),
            "explain": EXPLAIN,
        }, required=["pick", "plans", "workload", "constraints", "assumptions", "catalog",
                     "artifact"]),
    }
