"""`advisor check` with fake environments and credential files, and every socket refused: it
must find what is configured without a network call."""

from __future__ import annotations

import json
import socket

import pytest

from advisor.cli import main

CLOUD_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                   "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
                   "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                   "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                   "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT",
                   "CLOUDSDK_CORE_PROJECT", "CLOUDSDK_ACTIVE_CONFIG_NAME")


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A machine with no cloud configured (a fresh home) and no network."""
    for variable in CLOUD_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / ".aws" / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / ".aws" / "credentials"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))

    attempts = []

    def refuse(*args, **kwargs):  # recorded too, since the SDK may catch what it raises
        attempts.append(args)
        raise OSError("advisor check tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield tmp_path
    assert not attempts, f"network calls: {attempts}"


def check(capsys, *args: str) -> tuple[int, dict]:
    with pytest.raises(SystemExit) as exited:
        main(["check", "--format", "json", *args])
    out = json.loads(capsys.readouterr().out)
    return exited.value.code, {row["check"]: row for row in out["checks"]} | {
        "works": out["advisor_works"]}


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_nothing_configured_still_exits_0_naming_each_fix(home, capsys):
    code, rows = check(capsys)
    assert code == 0 and rows["works"]
    assert [rows[name]["status"] for name in ("model cards", "artifact")] == ["ok", "ok"]
    assert rows["catalog"]["status"] in ("ok", "stale") and "offerings" in rows["catalog"]["detail"]
    assert rows["gcp credentials"]["status"] == "missing"
    assert rows["gcp credentials"]["fix"] == "gcloud auth application-default login"
    assert rows["aws credentials"]["status"] == "missing"
    assert "aws configure" in rows["aws credentials"]["fix"]


def test_the_table_ends_with_the_verdict(home, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["check"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "gcp credentials" in out and out.rstrip().endswith("the local advisor works")


def test_gcp_application_default_credentials_and_their_project(home, capsys):
    write(home / "gcloud" / "application_default_credentials.json", json.dumps(
        {"type": "authorized_user", "client_id": "x", "client_secret": "y",
         "refresh_token": "z", "quota_project_id": "my-project"}))
    row = check(capsys)[1]["gcp credentials"]
    assert row["status"] == "ok" and row["fix"] is None
    assert "authorized user from application-default credentials" in row["detail"]
    assert "project my-project" in row["detail"]


def test_gcp_key_file_named_by_the_environment(home, monkeypatch, capsys):
    key = write(home / "key.json", json.dumps({"type": "service_account",
                                                "project_id": "sa-project"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    row = check(capsys)[1]["gcp credentials"]
    assert row["status"] == "ok" and "service account from GOOGLE_APPLICATION_CREDENTIALS" in \
        row["detail"] and "project sa-project" in row["detail"]
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(home / "gone.json"))
    row = check(capsys)[1]["gcp credentials"]
    assert row["status"] == "missing" and "gone.json, which does not exist" in row["detail"]


def test_a_gcloud_login_is_not_application_default_credentials(home, capsys):
    write(home / "gcloud" / "configurations" / "config_default",
          "[core]\naccount = me@example.com\nproject = p\n")
    row = check(capsys)[1]["gcp credentials"]
    assert row["status"] == "missing" and "logged in as me@example.com" in row["detail"]
    assert row["fix"] == "gcloud auth application-default login"


def test_aws_keys_in_the_environment(home, monkeypatch, capsys):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    row = check(capsys)[1]["aws credentials"]
    assert row["status"] == "ok" and "environment variables" in row["detail"]
    assert "region eu-west-1" in row["detail"]


def test_aws_profile_from_the_shared_files(home, monkeypatch, capsys):
    write(home / ".aws" / "credentials",
          "[dev]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = secret\n")
    write(home / ".aws" / "config", "[profile dev]\nregion = us-west-2\n")
    monkeypatch.setenv("AWS_PROFILE", "dev")
    row = check(capsys)[1]["aws credentials"]
    assert row["status"] == "ok"
    assert f"profile dev in {home / '.aws' / 'credentials'}; region us-west-2" == row["detail"]
    monkeypatch.setenv("AWS_PROFILE", "prod")
    row = check(capsys)[1]["aws credentials"]
    assert row["status"] == "missing" and "prod" in row["detail"]


def test_a_profile_that_assumes_a_role_is_configured_but_not_resolved(home, monkeypatch,
                                                                      capsys):
    write(home / ".aws" / "config", "[profile ops]\nrole_arn = arn:aws:iam::1:role/x\n"
          "source_profile = base\n[profile base]\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_PROFILE", "ops")
    row = check(capsys)[1]["aws credentials"]
    assert row["status"] == "ok" and "an assumed role when first used" in row["detail"]


def test_a_missing_sdk_extra_is_named_with_its_install_command(home, monkeypatch, capsys):
    from importlib.metadata import PackageNotFoundError

    import cloud.credentials

    def version(name):
        if name == "boto3":
            raise PackageNotFoundError(name)
        return "1.0"

    monkeypatch.setattr(cloud.credentials, "version", version)
    row = check(capsys)[1]["aws SDK"]
    assert row == {"check": "aws SDK", "status": "missing", "detail": "boto3 not installed",
                   "fix": "pip install 'gpu-advisor[aws]'"}


def test_a_broken_artifact_means_the_advisor_does_not_work(home, monkeypatch, capsys):
    monkeypatch.setenv("GPUADVISOR_ARTIFACT", str(write(home / "a.json", "{")))
    code, rows = check(capsys)
    assert code == 1 and not rows["works"]
    assert (rows["artifact"]["status"] == "missing"
            and "not valid JSON" in rows["artifact"]["detail"])
    assert "GPUADVISOR_ARTIFACT" in rows["artifact"]["fix"]
