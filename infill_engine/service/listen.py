"""Where the engine service listens and who may talk to it: `unix:PATH`, `tcp:HOST:PORT` (the
msgpack front) or `http://HOST:PORT` (the HTTP front) addresses, loopback by default, a token on
TCP and HTTP (from an owner-only file or the environment), Unix sockets created 0600."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

TOKEN_ENV = "DLLM_SERVE_TOKEN"


class ServeError(Exception):
    """The service cannot start as configured (address, token, socket path)."""


@dataclass(frozen=True)
class Address:
    kind: Literal["unix", "tcp", "http"]
    path: str = ""
    host: str = ""
    port: int = 0

    def __str__(self) -> str:
        if self.kind == "unix":
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        if self.kind == "http":
            return f"http://{host}:{self.port}"
        return f"tcp:{host}:{self.port}"


def parse_address(text: str) -> Address:
    """`unix:PATH`, `tcp:HOST:PORT` (also written `tcp://HOST:PORT`) or `http://HOST:PORT`; an
    IPv6 host in brackets."""
    kind, sep, rest = text.strip().partition(":")
    if kind == "unix" and sep and rest:
        return Address("unix", path=rest)
    if kind in ("tcp", "http") and sep and (kind == "tcp" or rest.startswith("//")):
        hostport = split_host_port(rest.removeprefix("//").rstrip("/"))
        if hostport is not None and hostport[0]:
            return Address("tcp" if kind == "tcp" else "http", host=hostport[0], port=hostport[1])
    raise ServeError(f"must be unix:PATH, tcp://HOST:PORT or http://HOST:PORT, got {text[:200]!r}")


def split_host_port(text: str) -> tuple[str, int] | None:
    """`HOST:PORT` (`[::1]:PORT` for an IPv6 host) as (host, port); None if it is not one. The
    host may be empty."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not int(port) < 65536:
        return None
    return (host[1:-1] if host.startswith("[") and host.endswith("]") else host), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token in an owner-only file; refuses a file others may read or write."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise ServeError(f"cannot open the token file: {e}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ServeError(f"token file {path} is not a regular file")
        if st.st_mode & 0o077:
            raise ServeError(
                f"token file {path} is open to group/others (mode {stat.S_IMODE(st.st_mode):04o});"
                f" run: chmod 600 {path}"
            )
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise ServeError(f"token file {path} is not owned by this user")
        raw = f.read(4097)
    if len(raw) > 4096:
        raise ServeError(f"token file {path} is over 4096 bytes")
    token = raw.decode("utf-8", errors="strict").strip()
    if not token:
        raise ServeError(f"token file {path} is empty")
    return token


def resolve_token(token_file: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """--token-file wins over $DLLM_SERVE_TOKEN; None when neither is set."""
    if token_file:
        return read_token_file(token_file)
    value = (os.environ if env is None else env).get(TOKEN_ENV, "").strip()
    return value or None


def bind_unix(path: str) -> socket.socket:
    """A Unix socket bound at `path` with mode 0600, not yet listening. A stale socket file (no
    server answers on it) is removed; a live one, or a file that is not a socket, is refused."""
    if os.path.lexists(path):
        st = os.lstat(path)
        if not stat.S_ISSOCK(st.st_mode):
            raise ServeError(f"{path} exists and is not a socket; not removing it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(1.0)
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # stale: its server is gone
        except OSError as e:
            raise ServeError(f"{path}: cannot check the existing socket: {e}") from None
        else:
            raise ServeError(f"another server is listening on {path}")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # the file is created 0600: no window where others may connect
    try:
        sock.bind(path)
    except OSError as e:
        sock.close()
        raise ServeError(f"cannot bind {path}: {e}") from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)  # and again, in case the platform ignores the umask for sockets
    return sock


def check_listen(address: Address, token: str | None, allow_remote: bool) -> None:
    """TCP and HTTP need a token, and a loopback host unless remote clients are allowed
    (ServeError). HTTP on loopback too: any web page the user opens can post to a loopback
    port, and only the token tells the user's own clients from it."""
    if address.kind == "unix":
        return
    if token is None:
        name = address.kind.upper()
        raise ServeError(f"{name} needs a token: set ${TOKEN_ENV} or pass --token-file (mode 0600)")
    if not allow_remote and not is_loopback(address.host):
        raise ServeError(f"{address.host} is not a loopback address; pass --allow-remote")


def client_hint(bound: Address, token: str) -> tuple[str, str]:
    """What a user pastes into a client of the HTTP front: the token, and llama.vim's config
    (without `api_key` llama.vim gets 401s and shows nothing, without a word)."""
    host = "127.0.0.1" if bound.host in ("0.0.0.0", "") else bound.host
    host = "[::1]" if host == "::" else (f"[{host}]" if ":" in host else host)
    endpoint = f"http://{host}:{bound.port}/infill"
    quoted = token.replace("'", "''")  # Vim's single-quoted string
    return (
        f"token (the API key of every client; Authorization: Bearer TOKEN): {token}",
        f"llama.vim: let g:llama_config = {{'endpoint_fim': '{endpoint}', 'api_key': '{quoted}'}}",
    )


def socket_mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)
