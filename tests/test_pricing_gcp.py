"""GCP catalog refresh against recorded Cloud Billing Catalog API responses, served over
local HTTP, with Application Default Credentials whose token endpoint is that server too."""

import csv
import json
import threading
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from typer.testing import CliRunner

import advisor.cli.catalog  # noqa: F401  (registers `advisor catalog`)
from advisor.cli.app import app
from cloud import catalog as cat
from cloud import pricing_gcp
from cloud.provider import CredentialsError, ProviderError

RECORDED = Path(__file__).parent / "recorded"
PAGE1 = json.loads((RECORDED / "pricing_gcp_skus_page1.json").read_text())
PAGE2 = json.loads((RECORDED / "pricing_gcp_skus_page2.json").read_text())
SKUS_PATH = "/v1/services/6F81-5844-456A/skus"
TOKEN = "ya29.recorded-access-token"


class BillingServer(ThreadingHTTPServer):
    """Serves the two recorded SKU pages (and OAuth tokens); remembers every request."""

    def __init__(self, fail_with: int | None = None):
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, str, dict, str | None]] = []
        self.fail_with = fail_with

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _reply(self, status: int, body: dict):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # the OAuth token endpoint of the authorized_user credentials
        length = int(self.headers["Content-Length"])
        form = parse_qs(self.rfile.read(length).decode())
        self.server.requests.append(("POST", self.path, form, None))
        self._reply(200, {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"})

    def do_GET(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        self.server.requests.append(("GET", url.path, query, self.headers.get("Authorization")))
        if self.server.fail_with:
            error = {"code": self.server.fail_with, "status": "PERMISSION_DENIED",
                     "message": "Cloud Billing API has not been used in project 1234 before "
                                "or it is disabled."}
            return self._reply(self.server.fail_with, {"error": error})
        if url.path != SKUS_PATH:
            return self._reply(404, {"error": {"message": "not found"}})
        self._reply(200, PAGE2 if query.get("pageToken") == [PAGE1["nextPageToken"]] else PAGE1)


@pytest.fixture
def server(request):
    srv = BillingServer(getattr(request, "param", None))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_unit_price_reads_units_and_nanos():
    v100 = PAGE2["skus"][0]
    assert pricing_gcp.unit_price(v100) == pytest.approx(2.55)
    assert pricing_gcp.unit_price(PAGE1["skus"][3]) == pytest.approx(0.004237)


def test_build_offerings_prices_every_part():
    offerings = pricing_gcp.build_offerings(
        PAGE1["skus"] + PAGE2["skus"], ["us-central1", "europe-west4"], date(2026, 11, 20)
    )
    by_key = {(o.region, o.instance_type, o.gpu_type): o for o in offerings}
    # T4 in us-central1 on n1-standard-8/16/32; V100 priced only in europe-west4; L4 on g2.
    assert sorted(by_key) == sorted(
        [("us-central1", f"n1-standard-{v}", "T4") for v in (8, 16, 32)]
        + [("europe-west4", f"n1-standard-{v}", "V100") for v in (8, 16, 32, 64)]
        + [("us-central1", f"g2-standard-{v}", "L4") for v in (4, 24, 48, 96)]
    )
    t4 = by_key[("us-central1", "n1-standard-16", "T4")]
    assert t4.gpu_price_on_demand == pytest.approx(2 * 0.35)
    assert t4.host_price_on_demand == pytest.approx(16 * 0.031611 + 60 * 0.004237, abs=1e-4)
    assert t4.price_on_demand == pytest.approx(t4.gpu_price_on_demand + t4.host_price_on_demand)
    assert t4.price_spot == pytest.approx(2 * 0.11 + 16 * 0.006655 + 60 * 0.000892, abs=1e-4)
    assert "0E23-9A1C-38A2" in t4.source and "8B4F-2A91-77C0" in t4.source
    v100 = by_key[("europe-west4", "n1-standard-64", "V100")]
    assert v100.price_on_demand == pytest.approx(8 * 2.55 + 64 * 0.034773 + 240 * 0.004661,
                                                 abs=1e-3)
    assert v100.price_spot is None and v100.interconnect == "NVLink"
    l4 = by_key[("us-central1", "g2-standard-4", "L4")]
    assert l4.price_on_demand == pytest.approx(0.7068, abs=1e-4)
    assert all(o.as_of == date(2026, 11, 20) for o in offerings)


def test_fetch_follows_pages_with_exact_requests(server):
    from google.auth.credentials import AnonymousCredentials
    from google.auth.transport.requests import AuthorizedSession

    skus = pricing_gcp.fetch_skus(AuthorizedSession(AnonymousCredentials()), server.url)
    assert len(skus) == len(PAGE1["skus"]) + len(PAGE2["skus"])
    assert [(m, p, q) for m, p, q, _ in server.requests] == [
        ("GET", SKUS_PATH, {"currencyCode": ["USD"], "pageSize": ["5000"]}),
        ("GET", SKUS_PATH, {"currencyCode": ["USD"], "pageSize": ["5000"],
                            "pageToken": [PAGE1["nextPageToken"]]}),
    ]


def _adc_file(tmp_path, server) -> Path:
    """A service-account key (fresh RSA key) whose token endpoint is the local server."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = tmp_path / "adc.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "recorded-project", "private_key_id": "k1",
        "private_key": pem, "client_email": "advisor@recorded-project.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": f"{server.url}/token",
    }))
    return path


def _claims(assertion: str) -> dict:
    import base64

    payload = assertion.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


runner = CliRunner()


def test_cli_refresh_round_trip(server, tmp_path):
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(_adc_file(tmp_path, server)),
           "GOOGLE_CLOUD_PROJECT": "recorded-project"}
    out = tmp_path / "out"
    result = runner.invoke(app, ["catalog", "refresh", "--provider", "gcp",
                                 "--endpoint", server.url,
                                 "--output-dir", str(out), "--region", "us-central1"], env=env)
    assert result.exit_code == 0, result.output
    assert "catalog_gcp.csv (7 offerings)" in result.stdout
    token_request, *sku_requests = server.requests
    assert token_request[:2] == ("POST", "/token")
    assert token_request[2]["grant_type"] == ["urn:ietf:params:oauth:grant-type:jwt-bearer"]
    assert _claims(token_request[2]["assertion"][0])["scope"] == pricing_gcp.SCOPE
    assert [auth for *_, auth in sku_requests] == [f"Bearer {TOKEN}"] * 2
    rebuilt = cat.load_catalog([out / "catalog_gcp.csv"])
    assert rebuilt.stale_days == 0
    assert sorted(o.instance_type for o in rebuilt.offerings) == sorted(
        [f"n1-standard-{v}" for v in (8, 16, 32)] + [f"g2-standard-{v}" for v in (4, 24, 48, 96)]
    )
    with open(out / "catalog_gcp.csv") as handle:
        assert tuple(csv.DictReader(handle).fieldnames) == cat.COLUMNS


def test_missing_credentials_exit_1_nothing_written(tmp_path):
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "absent.json")}
    result = runner.invoke(app, ["catalog", "refresh", "--provider", "gcp",
                                 "--output-dir", str(tmp_path / "out")], env=env)
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "GOOGLE_APPLICATION_CREDENTIALS" in result.stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(CredentialsError):
        pricing_gcp.authorized_session()


@pytest.mark.parametrize("server", [403], indirect=True)
def test_api_error_keeps_old_catalog(server, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "catalog_gcp.csv").write_text("previous catalog\n")
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(_adc_file(tmp_path, server)),
           "GOOGLE_CLOUD_PROJECT": "p"}
    result = runner.invoke(app, ["catalog", "refresh", "--provider", "gcp",
                                 "--endpoint", server.url,
                                 "--output-dir", str(out)], env=env)
    assert result.exit_code == 1
    assert ("HTTP 403: Cloud Billing API has not been used" in result.stderr
            and "Traceback" not in result.output)
    assert (out / "catalog_gcp.csv").read_text() == "previous catalog\n"
    assert [p.name for p in out.iterdir()] == ["catalog_gcp.csv"]


def test_unreachable_endpoint_is_a_provider_error(quick_gcp_retries):
    from google.auth.credentials import AnonymousCredentials
    from google.auth.transport.requests import AuthorizedSession

    with pytest.raises(ProviderError, match="cannot reach the Cloud Billing API.*"
                                            r"check the network.*after 0.5s of retries\)$"):
        pricing_gcp.fetch_skus(AuthorizedSession(AnonymousCredentials()), "http://127.0.0.1:9")
