"""The loopback service's HTTPS proxy: how a client reaches host names nothing here resolves.

azure-ai-ml reaches a datastore by its storage account's host, ``https://<account>.blob.<storage
suffix>`` (``STORAGE_ACCOUNT_URLS`` in ``azure.ai.ml._artifacts._artifact_utilities``), not by a
URL the service hands out. No name service maps that host to 127.0.0.1, so the loopback also
runs a plain-HTTP proxy on loopback: clients find it through ``HTTPS_PROXY`` (azure-core's
requests transport honours it, as it would a company proxy), ask it to ``CONNECT
<account>.blob.<suffix>:443``, and the proxy joins that tunnel to the loopback's own TLS endpoint,
whose certificate also names that host. The client's TLS, its ``Host`` header and the Blob
service's host-style paths are then exactly what they would be on Azure.

Only the host names the service answers are tunnelled; any other ``CONNECT`` gets ``403`` (so
nothing leaves the machine through it), and any request that is not a ``CONNECT`` gets ``405``.
"""
from __future__ import annotations

import select
import socket
import socketserver
import threading
from collections.abc import Callable


class _Handler(socketserver.StreamRequestHandler):
    #: host -> (address, port) to tunnel to; set on the subclass ``serve_proxy`` builds.
    route: Callable[[str], tuple[str, int] | None] = staticmethod(lambda host: None)
    tunnels: list[str]

    def handle(self) -> None:
        line = self.rfile.readline(65537).decode("latin-1").strip()
        while True:  # the request's headers; a CONNECT has nothing after them
            header = self.rfile.readline(65537)
            if header in (b"\r\n", b"\n", b""):
                break
        method, _, rest = line.partition(" ")
        target = rest.split(" ", 1)[0]
        if method != "CONNECT":
            self._answer(405, "Method Not Allowed", "the loopback proxy only tunnels CONNECT")
            return
        host, _, port = target.rpartition(":")
        upstream = type(self).route(host.lower()) if port == "443" else None
        if upstream is None:
            self._answer(403, "Forbidden", f"the loopback proxy does not reach {target}")
            return
        try:
            remote = socket.create_connection(upstream, timeout=30)
        except OSError as exc:
            self._answer(502, "Bad Gateway", f"{target}: {exc}")
            return
        type(self).tunnels.append(host.lower())
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self.wfile.flush()
        _pipe(self.connection, remote)

    def _answer(self, status: int, reason: str, text: str) -> None:
        body = (text + "\n").encode()
        self.wfile.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                         + body)


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    sockets = [a, b]
    try:
        while True:
            ready, _, broken = select.select(sockets, [], sockets, 60)
            if broken or not ready:
                return
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                (b if sock is a else a).sendall(data)
    except OSError:
        return
    finally:
        b.close()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve_proxy(route: Callable[[str], tuple[str, int] | None]) -> tuple[_Server, list[str]]:
    """Serve the proxy on a free 127.0.0.1 port in a daemon thread. ``route(host)`` gives the
    address to tunnel ``CONNECT host:443`` to, or None to refuse it. Returns the server and the
    list the hosts it tunnelled are appended to."""
    tunnels: list[str] = []
    handler = type("LoopbackProxyHandler", (_Handler,), {"route": staticmethod(route),
                                                         "tunnels": tunnels})
    server = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, name="loopback-azureml-proxy",
                     daemon=True).start()
    return server, tunnels
