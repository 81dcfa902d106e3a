"""What replicas run beside them in a test: a real redis-server on a free loopback port (Debian's
`redis-server`), and nginx in front (Debian's `nginx-light`), started and stopped by the test.

Outside CI a test that needs one is skipped when it is not installed; in CI its absence is a failure
(`.ci/run` installs them).
"""

import os
import shutil
import socket
import subprocess
import time
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
    outside CI where it is not installed."""

    def __init__(self, directory: Path, ports: list[int]) -> None:
        binary = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
        if binary is None:
            if os.environ.get("CI"):
                raise AssertionError("CI must install nginx (.ci/run does)")
            pytest.skip("nginx not installed: apt-get install nginx-light")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        servers = "".join(f"server 127.0.0.1:{port};" for port in ports)
        temp = " ".join(f"{kind}_temp_path {directory}/{kind};" for kind in
                        ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        config = directory / "nginx.conf"
        config.write_text(
            f"daemon off; worker_processes 1; pid {directory}/nginx.pid; error_log {directory}/error.log;"
            f"events {{}} http {{ access_log off; {temp} upstream toolbridge {{ {servers} }}"
            f"server {{ listen 127.0.0.1:{self.port}; location / {{ proxy_pass http://toolbridge;"
            f"proxy_http_version 1.1; proxy_set_header Connection ''; proxy_set_header Host 127.0.0.1;"
            f"proxy_buffering off; }} }} }}"
        )
        self._process = subprocess.Popen([binary, "-c", str(config), "-p", str(directory)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self._process.poll() is None, (directory / "error.log").read_text()
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.02)

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)
