"""A Hugging Face Hub stand-in on loopback: the endpoints huggingface_hub calls to resolve and
download a model, over real HTTP (point `HF_ENDPOINT` at `url`).

- `GET /api/models/ORG/NAME[/revision/REV]`: model info (`sha`, `siblings`).
- `GET /api/models/ORG/NAME/tree/REV?recursive=...`: the file listing, with LFS entries for the
  weights (their sha256 is the ETag, as on the Hub).
- `HEAD|GET /ORG/NAME/resolve/REV/PATH`: the file, with `X-Repo-Commit`, `ETag` and byte ranges.
- Errors as the Hub gives them: 404 with `X-Error-Code` RepoNotFound / RevisionNotFound /
  EntryNotFound.

Faults for the tests: `cut_once` (the next GET of a file sends half its body and drops the
connection), `fail` (a GET of the file is refused with 403, which the library does not retry).
`requests` records (method, path, Range header).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up mid-answer (the cut tests) is expected


@dataclass
class Repo:
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # sha -> path -> bytes
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag -> sha

    def add(self, files: dict[str, bytes], ref: str = "main") -> str:
        sha = hashlib.sha1(repr(sorted((k, v) for k, v in files.items())).encode()).hexdigest()
        self.commits[sha] = dict(files)
        self.refs[ref] = sha
        return sha

    def resolve(self, rev: str) -> str | None:
        if rev in self.commits:
            return rev
        return self.refs.get(rev)


def read_dir(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def _is_lfs(name: str) -> bool:
    return name.endswith((".safetensors", ".bin", ".pt"))


class HubStandIn:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.cut_once: set[str] = set()
        self.fail: set[str] = set()
        self.gated: set[str] = set()  # repositories whose terms the caller has not accepted
        self._lock = threading.Lock()
        self._server = _Quiet(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def repo(self, repo_id: str) -> Repo:
        return self.repos.setdefault(repo_id, Repo())

    def fetched(self, name: str) -> list[tuple[str, str | None]]:
        """(method, Range) of every request for a file named `name`."""
        return [(m, r) for m, p, r in self.requests if "/resolve/" in p and p.endswith("/" + name)]

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._route(head=True)

            def do_GET(self) -> None:
                self._route(head=False)

            def _route(self, head: bool) -> None:
                path = unquote(urlsplit(self.path).path)
                with hub._lock:
                    hub.requests.append((self.command, path, self.headers.get("Range")))
                if path.startswith("/api/models/"):
                    self._api(path[len("/api/models/") :])
                elif "/resolve/" in path:
                    repo_id, _, rest = path.strip("/").partition("/resolve/")
                    self._file(repo_id, rest, head)
                else:
                    self._error(404, "RepoNotFound")

            def _api(self, rest: str) -> None:
                parts = rest.split("/")
                repo_id, tail = "/".join(parts[:2]), parts[2:]
                repo = hub.repos.get(repo_id)
                if repo is None:
                    return self._error(404, "RepoNotFound")
                if repo_id in hub.gated:
                    return self._error(403, "GatedRepo")
                kind = tail[0] if tail else "revision"
                rev = "/".join(tail[1:]) if len(tail) > 1 else "main"
                sha = repo.resolve(rev)
                if sha is None:
                    return self._error(404, "RevisionNotFound")
                files = repo.commits[sha]
                if kind == "tree":
                    body: object = [self._entry(p, b) for p, b in sorted(files.items())]
                else:
                    body = {
                        "id": repo_id, "modelId": repo_id, "sha": sha, "private": False,
                        "siblings": [{"rfilename": p} for p in sorted(files)],
                    }  # fmt: skip
                self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

            @staticmethod
            def _entry(path: str, data: bytes) -> dict[str, object]:
                entry: dict[str, object] = {
                    "type": "file", "path": path, "size": len(data),
                    "oid": hashlib.sha1(data).hexdigest(),
                }  # fmt: skip
                if _is_lfs(path):
                    sha = hashlib.sha256(data).hexdigest()
                    entry["lfs"] = {"oid": sha, "size": len(data), "pointerSize": 134}
                return entry

            def _file(self, repo_id: str, rest: str, head: bool) -> None:
                repo = hub.repos.get(repo_id)
                if repo is None:
                    return self._error(404, "RepoNotFound")
                rev, _, name = rest.partition("/")
                sha = repo.resolve(rev)
                if sha is None and "/" in name:  # a revision with slashes, e.g. refs/pr/1
                    for ref in repo.refs:
                        if rest.startswith(ref + "/"):
                            sha, name = repo.refs[ref], rest[len(ref) + 1 :]
                if sha is None:
                    return self._error(404, "RevisionNotFound")
                data = repo.commits[sha].get(name)
                if data is None:
                    return self._error(404, "EntryNotFound")
                if name in hub.fail and not head:  # listed, then refused: the download stops
                    return self._send(403, b"refused", {})
                etag = (hashlib.sha256 if _is_lfs(name) else hashlib.sha1)(data).hexdigest()
                headers = {"X-Repo-Commit": sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
                if head:
                    headers["Content-Length"] = str(len(data))
                    return self._send(200, b"", headers, head=True)
                start, status = 0, 200
                wanted = self.headers.get("Range")
                if wanted and wanted.startswith("bytes="):
                    start = int(wanted[len("bytes=") :].split("-")[0])
                    status = 206
                    headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
                body = data[start:]
                with hub._lock:
                    cut = name in hub.cut_once and start == 0
                    hub.cut_once.discard(name)
                if cut:  # promise the whole file, send half, hang up
                    headers["Content-Length"] = str(len(body))
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return None
                return self._send(status, body, headers)

            def _error(self, status: int, code: str) -> None:
                self._send(status, json.dumps({"error": code}).encode(), {"X-Error-Code": code})

            def _send(
                self, status: int, body: bytes, headers: dict[str, str], head: bool = False
            ) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

        return Handler
