"""Running the engine service: `serve` listens on an address until stopped, and
`ServiceThread` runs it on an event-loop thread of its own (tests, bench-serve)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable

from .front import Service
from .listen import Address, ServeError, bind_unix, check_listen, client_hint

log = logging.getLogger("infill_engine.service")


async def serve(
    service: Service,
    address: Address,
    *,
    allow_remote: bool = False,
    ready: Callable[[Address], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Listen on `address` until `stop` is set (or forever). The service is shut down when this
    returns, also when it cannot listen (ServeError)."""
    inode: int | None = None
    try:
        check_listen(address, service.token, allow_remote)
        if address.kind == "http":
            await _serve_http(service, address, ready, stop)
            return
        if address.kind == "tcp":
            try:
                server = await asyncio.start_server(service.handle, address.host, address.port)
            except OSError as e:
                raise ServeError(f"cannot listen on {address}: {e}") from None
            port = int(server.sockets[0].getsockname()[1])
            bound = Address("tcp", host=address.host, port=port)
        else:
            sock = bind_unix(address.path)
            inode = os.stat(address.path).st_ino
            try:
                server = await asyncio.start_unix_server(service.handle, sock=sock)
            except OSError as e:
                sock.close()
                raise ServeError(f"cannot listen on {address}: {e}") from None
            bound = address
        async with server:
            try:
                log.debug("listening on %s (model %s)", bound, service.model)
                if ready is not None:
                    ready(bound)
                await (stop.wait() if stop is not None else asyncio.Event().wait())
            finally:  # before the server waits for its connections to end
                server.close()
                service.shutdown()
    finally:
        service.shutdown()
        if inode is not None:
            with contextlib.suppress(OSError):
                if os.stat(address.path).st_ino == inode:
                    os.unlink(address.path)


async def _serve_http(
    service: Service,
    address: Address,
    ready: Callable[[Address], None] | None,
    stop: asyncio.Event | None,
) -> None:
    """The HTTP front (http.py) under uvicorn, on this event loop."""
    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    from .headers import header_deadline
    from .http import HttpFront

    def expired() -> None:
        service.counters.header_timeouts += 1

    config = uvicorn.Config(
        HttpFront(service).app,
        http=header_deadline(AutoHTTPProtocol, service.header_timeout_s, expired),
        host=address.host,
        port=address.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_keep_alive=30,
        timeout_graceful_shutdown=2,
    )
    try:  # bound here, so that a busy port is our error and not uvicorn's exit
        sock = _listening(address.host, address.port)
    except OSError as e:
        raise ServeError(f"cannot listen on {address}: {e}") from None
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            sock.close()
            raise ServeError(f"cannot serve HTTP on {address}")
        await asyncio.sleep(0.01)
    bound = Address("http", host=address.host, port=port)
    try:
        log.debug("listening on %s (model %s)", bound, service.model)
        if ready is not None:
            ready(bound)
        if service.token is not None:  # to paste into a client (serve's log, on stderr)
            for line in client_hint(bound, service.token):
                log.info("%s", line)
        waiter = asyncio.ensure_future(stop.wait() if stop is not None else asyncio.Event().wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
    finally:
        server.should_exit = True
        service.shutdown()  # running calls end "cancelled" and are answered
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)


def _listening(host: str, port: int) -> socket.socket:
    """A listening TCP socket. Its protocol is named (IPPROTO_TCP), as asyncio's own servers
    do: asyncio sets TCP_NODELAY only on such sockets' connections, and without it a reply
    written in two parts (headers, body) waits ~40 ms for the client's delayed ACK."""
    family, kind, proto, _, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


class ServiceThread:
    """A service on its own event-loop thread: tests and bench-serve. `start()` returns the
    bound address (a real port for tcp:HOST:0); `stop()` shuts it down."""

    def __init__(self, service: Service, address: Address, allow_remote: bool = False) -> None:
        self.service = service
        self.address = address
        self.allow_remote = allow_remote
        self.bound: Address | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="dllm-service", daemon=True)

    def start(self, timeout: float = 30.0) -> Address:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise ServeError("the service did not start in time")
        if self._error is not None:
            raise self._error
        assert self.bound is not None
        return self.bound

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)

    def __enter__(self) -> ServiceThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()

            def ready(bound: Address) -> None:
                self.bound = bound
                self._ready.set()

            await serve(
                self.service,
                self.address,
                allow_remote=self.allow_remote,
                ready=ready,
                stop=self._stop,
            )

        try:
            asyncio.run(main())
        except BaseException as e:
            self._error = e
        finally:
            self._ready.set()
