"""`advisor check`: what works here. The local advisor (model cards, catalog, artifact) and, per
cloud, its SDK extra and credentials, each missing piece with its fix. No network call."""

from __future__ import annotations

import warnings
from pathlib import Path

import typer

from advisor.cli.app import app
from advisor.cli.options import ARTIFACT_OPTION, CATALOG_OPTION
from gpuadvisor.cli.output import FORMAT_OPTION_HELP, Format, emit, emit_json
from gpuadvisor.cli.settings import envvar

COLUMNS = ["check", "status", "detail", "fix"]
LOCAL = ("model cards", "catalog", "artifact")  # what `advisor recommend` needs


@app.command("check")
def check(
    artifact: Path | None = ARTIFACT_OPTION,
    catalog: list[Path] | None = CATALOG_OPTION,
    fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_OPTION_HELP),
) -> None:
    """Check what works here: the local advisor (model cards, price catalog and its age, the
    fitted artifact in use) and, for GCP and AWS, whether the SDK extra is installed and
    credentials are configured, with the fix for each missing piece.

    Credentials are looked for in the environment and local files only (application-default
    credentials, GOOGLE_APPLICATION_CREDENTIALS, gcloud's configuration; AWS environment
    variables, shared credentials and config files, profiles): nothing is sent, no metadata
    server is asked. Exits 0 when the local advisor works, whatever the clouds lack.

    Examples:

      advisor check

      advisor check --format json

      GPUADVISOR_ARTIFACT=my_artifact.json advisor check
    """
    from cloud.credentials import aws_credentials, gcp_credentials, sdk

    rows = [_cards(), _catalog(catalog), _artifact(artifact)]
    for provider, credentials in (("gcp", gcp_credentials), ("aws", aws_credentials)):
        rows.append(_row(f"{provider} SDK", sdk(provider)))
        rows.append(_row(f"{provider} credentials", credentials()))
    works = all(row["status"] != "missing" for row in rows if row["check"] in LOCAL)
    if fmt is Format.json:
        emit_json({"advisor_works": works, "checks": rows})
    else:
        emit(rows, COLUMNS, fmt, title="gpu-advisor on this machine")
    if fmt is Format.table:
        typer.echo("the local advisor works" if works else
                   "the local advisor cannot run: see the rows marked missing")
    if not works:
        raise typer.Exit(1)


def _row(check: str, finding, status: str | None = None) -> dict:
    status = status or ("ok" if finding.ok else "missing")
    return {"check": check, "status": status, "detail": finding.detail,
            "fix": finding.fix if status != "ok" else None}


def _cards() -> dict:
    from cloud.credentials import Finding
    from gpuadvisor import data
    from gpuadvisor.cards import FILE, load_cards

    where = data.find(FILE)
    try:
        cards = load_cards()
    except (OSError, ValueError, KeyError) as error:
        return _row("model cards", Finding(False, f"cannot read {where} ({error})",
                                           "fix or remove your own model_cards.csv, or "
                                           "reinstall gpu-advisor"))
    return _row("model cards", Finding(True, f"{len(cards)} models in {where}"))


def _catalog(files: list[Path] | None) -> dict:
    from cloud.catalog import (
        PROVIDERS,
        STALE_AFTER_DAYS,
        CatalogError,
        StaleCatalogWarning,
        catalog_name,
        load_catalog,
    )  # fmt: skip
    from cloud.credentials import Finding
    from gpuadvisor import data

    names = ", ".join(map(str, files or [data.find(catalog_name(p)) for p in PROVIDERS]))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StaleCatalogWarning)  # reported as the row's status
            loaded = load_catalog(files or None)
    except CatalogError as error:
        return _row("catalog", Finding(False, str(error), "restore the file, or run "
                                       "advisor catalog refresh --provider gcp|aws"))
    if not loaded.offerings:
        return _row("catalog", Finding(False, f"no offering in {names}",
                                       "advisor catalog refresh --provider gcp|aws"))
    as_of = min(o.as_of for o in loaded.offerings)
    finding = Finding(True, f"{len(loaded.offerings):,} offerings in {names}; prices as of "
                      f"{as_of} ({loaded.stale_days} days old)",
                      "advisor catalog refresh --provider gcp|aws, for current prices")
    return _row("catalog", finding, "stale" if loaded.stale_days > STALE_AFTER_DAYS else "ok")


def _artifact(path: Path | None) -> dict:
    from advisor.artifact import ArtifactError, load_artifact
    from cloud.credentials import Finding
    from gpuadvisor.data import find

    try:
        doc = load_artifact(path).doc
    except ArtifactError as error:
        return _row("artifact", Finding(False, str(error), "give --artifact (or "
                                        f"{envvar('artifact')}) a file that advisor fit wrote"))
    trained = doc.get("training_data", {})
    return _row("artifact", Finding(True, f"{path or find('model_artifact.json')}: schema "
                                    f"{doc['schema_version']}, fitted {doc.get('fitted_at')} on "
                                    f"{trained.get('throughput_configs')} throughput "
                                    "configurations"))
