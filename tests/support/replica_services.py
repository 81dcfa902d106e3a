"""What replicas run beside them in a test: a real redis-server on a free loopback port (Debian's
`redis-server`), and nginx in front (Debian's `nginx-light`), started and stopped by the test; a stand-in
for Docker's DNS, and the address of a replica that is gone (it never answers).

Outside CI a test that needs one is skipped when it is not installed; in CI its absence is a failure
(`.ci/run` installs them).
"""

import os
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from tests.support.servers import free_port

BINARY = shutil.which("redis-server")
START_TIMEOUT = 10.0


def require_redis() -> str:
    if BINARY is None:
        if os.environ.get("CI"):
            raise AssertionError("CI must install redis-server (.ci/run does)")
        pytest.skip("redis-server not installed: apt-get install redis-server")
    return BINARY


class RedisServer:
    """One redis-server process; `stop()` and `start()` again on the same port, as an outage would."""

    def __init__(self) -> None:
        self.binary = require_redis()
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port, socket_timeout=1)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.02)
            finally:
                client.close()

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)
            self._process = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2)


class Nginx:
    """Debian's nginx, round-robin in front of `ports` on `port`, as a load balancer would be; skipped
    outside CI where it is not installed. `site` (a function of the port to listen on) replaces that
    round robin with a config of the http context, such as deploy/nginx.conf."""

    def __init__(self, directory: Path, ports: list[int], site: Callable[[int], str] | None = None) -> None:
        binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
        if binary is None:
            if os.environ.get("CI"):
                raise AssertionError("CI must install nginx (.ci/run does)")
            pytest.skip("nginx not installed: apt-get install nginx-light")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.error_log = directory / "error.log"
        servers = "".join(f"server 127.0.0.1:{port};" for port in ports)
        temp = " ".join(f"{kind}_temp_path {directory}/{kind};" for kind in
                        ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        config = directory / "nginx.conf"
        round_robin = (
            f"upstream toolbridge {{ {servers} }}"
            f"server {{ listen 127.0.0.1:{self.port}; location / {{ proxy_pass http://toolbridge;"
            f"proxy_http_version 1.1; proxy_set_header Connection ''; proxy_set_header Host 127.0.0.1;"
            f"proxy_buffering off; }} }}"
        )
        config.write_text(
            f"daemon off; worker_processes 1; pid {directory}/nginx.pid; error_log {self.error_log};"
            f"events {{}} http {{ access_log off; {temp} {site(self.port) if site else round_robin} }}"
        )
        self._process = subprocess.Popen([binary, "-c", str(config), "-p", str(directory)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self._process.poll() is None, self.error_log.read_text()
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.02)

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)


class StubDns:
    """A DNS server on a free loopback UDP port that answers A queries for `name` with `addresses` (which
    a test may change, as Docker's DNS changes when replicas come and go) and counts the queries."""

    def __init__(self, name: str, addresses: list[str]) -> None:
        self.name, self.addresses, self.queries = name, addresses, 0
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.1)  # so that close() is seen
        self.port = self._socket.getsockname()[1]
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                query, client = self._socket.recvfrom(512)
            except TimeoutError:
                continue
            self.queries += 1
            self._socket.sendto(self._answer(query), client)

    def _answer(self, query: bytes) -> bytes:
        end = query.index(b"\0", 12) + 5  # the question: name, type, class
        labels, at = [], 12
        while query[at]:
            labels.append(query[at + 1:at + 1 + query[at]].decode())
            at += 1 + query[at]
        found = ".".join(labels).lower() == self.name and query[end - 4:end - 2] == b"\0\1"
        addresses = list(self.addresses) if found else []
        flags = 0x8180 if found else 0x8183  # a response, recursion available; NXDOMAIN when not found
        header = query[:2] + struct.pack(">HHHHH", flags, 1, len(addresses), 0, 0)
        # Each answer points at the question's name; a TTL of 600 s, as Docker's DNS gives.
        answers = b"".join(struct.pack(">HHHIH", 0xC00C, 1, 1, 600, 4) + socket.inet_aton(a) for a in addresses)
        return header + query[12:end] + answers

    def close(self) -> None:
        self._closing.set()
        self._thread.join(timeout=10)
        self._socket.close()


@contextmanager
def unanswered(address: str, port: int) -> Iterator[None]:
    """The address of a container that is gone: connections are never answered (SYNs dropped, as a full
    accept queue does), not refused, which is what held nginx for 38.6 s."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the replica's connections may linger
    listener.bind((address, port))
    listener.listen(0)
    filling = []
    try:
        for _ in range(3):
            filling.append(client := socket.socket())
            client.setblocking(False)
            client.connect_ex((address, port))
        probe = socket.socket()
        probe.settimeout(0.5)
        with pytest.raises(TimeoutError):  # this machine drops them indeed
            probe.connect((address, port))
        probe.close()
        yield
    finally:
        for client in filling:
            client.close()
        listener.close()
