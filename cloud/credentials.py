"""Whether each cloud's SDK extra is installed and where its credentials would come from, found
from the environment and local files only: no network call, no metadata server, no cloud API.
What `advisor check` reports; a provider still finds out for certain when it first calls."""

from __future__ import annotations

import configparser
import json
import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from cloud.adaptors import install_hint

# The distributions each provider's extra installs (pyproject.toml).
EXTRAS = {"gcp": ("google-cloud-compute", "google-cloud-storage"), "aws": ("boto3",)}
GCP_LOGIN = "gcloud auth application-default login"
AWS_LOGIN = "aws configure (or aws sso login), or set AWS_PROFILE"
# botocore's credential providers that read only the environment and local files; the others
# call the instance metadata service, a container endpoint, STS, SSO or an external process.
AWS_LOCAL_PROVIDERS = ("env", "shared-credentials-file", "config-file")
# What makes a profile get its credentials from elsewhere when first used.
AWS_DEFERRED = {"role_arn": "an assumed role", "sso_session": "AWS SSO",
                "sso_start_url": "AWS SSO", "credential_process": "a credential process",
                "web_identity_token_file": "a web identity"}


@dataclass(frozen=True)
class Finding:
    ok: bool
    detail: str  # what was found, or what is missing
    fix: str = ""  # what to run when not ok


def sdk(provider: str) -> Finding:
    """Whether the distributions of the provider's extra are installed (read from their
    metadata: nothing is imported)."""
    found, missing = [], []
    for distribution in EXTRAS[provider]:
        try:
            found.append(f"{distribution} {version(distribution)}")
        except PackageNotFoundError:
            missing.append(distribution)
    if missing:
        return Finding(False, f"{', '.join(missing)} not installed", install_hint(provider))
    return Finding(True, ", ".join(found))


def gcp_credentials() -> Finding:
    """Application Default Credentials as google.auth.default() would find them, short of the
    metadata server of a GCP VM, which is not asked."""
    named = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    gcloud = _gcloud_config()
    if named:
        if not Path(named).is_file():
            return Finding(False, f"GOOGLE_APPLICATION_CREDENTIALS names {named}, which does "
                           "not exist", f"point it at a key file, or unset it and run {GCP_LOGIN}")
        return _key_file(Path(named), "GOOGLE_APPLICATION_CREDENTIALS", gcloud)
    adc = gcloud["dir"] / "application_default_credentials.json"
    if adc.is_file():
        return _key_file(adc, "application-default credentials", gcloud)
    if gcloud.get("account"):
        return Finding(False, f"gcloud is logged in as {gcloud['account']}, but the SDK reads "
                       "application-default credentials, and there are none", GCP_LOGIN)
    return Finding(False, "no GOOGLE_APPLICATION_CREDENTIALS and no application-default "
                   f"credentials in {gcloud['dir']}", GCP_LOGIN)


def _gcloud_config() -> dict:
    """gcloud's config folder, and the account and project of its active configuration."""
    folder = Path(os.environ.get("CLOUDSDK_CONFIG") or Path.home() / ".config" / "gcloud")
    active = os.environ.get("CLOUDSDK_ACTIVE_CONFIG_NAME")
    if not active and (folder / "active_config").is_file():
        active = (folder / "active_config").read_text().strip()
    parser = configparser.ConfigParser()
    parser.read(folder / "configurations" / f"config_{active or 'default'}")
    return {"dir": folder, "account": parser.get("core", "account", fallback=None),
            "project": parser.get("core", "project", fallback=None)}


def _key_file(path: Path, source: str, gcloud: dict) -> Finding:
    try:
        doc = json.loads(path.read_text())
        kind = doc["type"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        return Finding(False, f"{path} ({source}) is not a credentials file ({error})",
                       f"replace it, or run {GCP_LOGIN}")
    project = (os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("CLOUDSDK_CORE_PROJECT")
               or doc.get("project_id") or doc.get("quota_project_id") or gcloud["project"])
    where = f"project {project}" if project else "no default project (give --project)"
    return Finding(True, f"{kind.replace('_', ' ')} from {source} ({path}); {where}")


def aws_credentials() -> Finding:
    """boto3's credential chain cut to its environment and shared-file providers (profiles
    included); a profile that assumes a role, uses SSO or runs a process is reported as
    configured without being resolved, since resolving it would call AWS."""
    try:
        import botocore.session
        from botocore.credentials import create_credential_resolver
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return Finding(False, "not checked: reading the AWS configuration needs boto3",
                       "pip install 'gpu-advisor[aws]'")
    session = botocore.session.Session()
    profile = session.get_config_variable("profile") or "default"
    try:
        resolver = create_credential_resolver(session)
        resolver.providers = [p for p in resolver.providers if p.METHOD in AWS_LOCAL_PROVIDERS]
        credentials = resolver.load_credentials()
        scoped = session.get_scoped_config()
    except BotoCoreError as error:  # a profile that is not there, a file that does not parse
        return Finding(False, str(error), AWS_LOGIN)
    region = session.get_config_variable("region")
    where = f"region {region}" if region else "no default region (give --region)"
    if credentials is not None:
        return Finding(True, f"{_aws_source(credentials.method, session, profile)}; {where}")
    deferred = next((kind for key, kind in AWS_DEFERRED.items() if key in scoped), None)
    if deferred:
        return Finding(True, f"profile {profile} gets them from {deferred} when first used "
                       f"(not resolved here); {where}")
    if os.environ.get("AWS_ROLE_ARN") and os.environ.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return Finding(True, f"a web identity (AWS_ROLE_ARN) when first used; {where}")
    return Finding(False, "none in the environment or the shared files (an EC2 instance role "
                   "is not asked)", AWS_LOGIN)


def _aws_source(method: str, session, profile: str) -> str:
    if method == "env":
        return "environment variables (AWS_ACCESS_KEY_ID)"
    variable = "credentials_file" if method == "shared-credentials-file" else "config_file"
    return f"profile {profile} in {os.path.expanduser(session.get_config_variable(variable))}"
