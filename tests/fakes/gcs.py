"""A local Cloud Storage JSON API endpoint for the gs:// sink tests: the three calls a sink
makes through google-cloud-storage (multipart upload, list with prefix, media download),
with objects kept in memory. Every request is kept in `requests`."""

from __future__ import annotations

import email
import json
import threading
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

from fakes.local_server import QuietHandler, start


class FakeGcs:
    def __init__(self, buckets=("results",)):
        self.objects: dict[str, dict[str, bytes]] = {b: {} for b in buckets}
        self.requests: list[tuple[str, str]] = []

    def handle(self, method: str, url: str, headers, body: bytes) -> tuple[int, bytes, str]:
        parsed = urlparse(url)
        query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
        parts = parsed.path.split("/")
        self.requests.append((method, parsed.path))
        # /upload/storage/v1/b/B/o, /storage/v1/b/B/o, /download/storage/v1/b/B/o/NAME
        offset = parts.index("b")
        bucket = unquote(parts[offset + 1])
        if bucket not in self.objects:
            return _json(404, {"error": {"code": 404,
                                         "message": "The specified bucket does not exist."}})
        store = self.objects[bucket]
        if method == "POST" and parts[1] == "upload" and query.get("uploadType") == "multipart":
            message = email.message_from_bytes(
                b"Content-Type: " + headers["Content-Type"].encode() + b"\r\n\r\n" + body)
            meta, media = message.get_payload()
            name = json.loads(meta.get_payload())["name"]
            store[name] = media.get_payload(decode=True)
            return _json(200, _resource(bucket, name, store[name]))
        if method == "GET" and len(parts) == offset + 3:
            prefix = query.get("prefix", "")
            items = [_resource(bucket, n, d) for n, d in sorted(store.items())
                     if n.startswith(prefix)]
            return _json(200, {"kind": "storage#objects", "items": items})
        if method == "GET" and parts[1] == "download":
            name = unquote("/".join(parts[offset + 3:]))
            if name not in store:
                return _json(404, {"error": {"code": 404, "message": "No such object"}})
            return 200, store[name], "application/octet-stream"
        return _json(400, {"error": {"code": 400,
                                     "message": f"unsupported {method} {parsed.path}"}})


def _resource(bucket: str, name: str, data: bytes) -> dict:
    return {"kind": "storage#object", "bucket": bucket, "name": name, "size": str(len(data)),
            "generation": "1", "contentType": "application/x-ndjson"}


def _json(status: int, payload: dict) -> tuple[int, bytes, str]:
    return status, json.dumps(payload).encode(), "application/json"


def serve(fake: FakeGcs) -> tuple[ThreadingHTTPServer, str]:
    lock = threading.Lock()

    class Handler(QuietHandler):
        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with lock:
                status, data, kind = fake.handle(self.command, self.path, self.headers, body)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

    return start(Handler)


def storage_client(endpoint: str):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(project="test-project", credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": endpoint})
