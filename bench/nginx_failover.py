"""How long a request waits in nginx when a replica has been scaled away (its address no longer answers),
with deploy/nginx.conf as shipped and with the config before issue 27 (an upstream block resolved once at
start, nginx's default 60 s connect timeout). Both in front of two stand-in replicas on 127.0.0.2 and
127.0.0.3 (one port, as containers on Docker's network), "toolbridge" resolved by a stand-in for Docker's
DNS, which stops naming the replica that went away. Needs Debian's nginx.

    .venv/bin/python -m bench.nginx_failover [--requests 12] [--before]

`--before` adds the old config: each request that picks the dead address waits up to 60 s.
"""

import argparse
import statistics
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from tests.support.fake_upstream import FakeUpstream, Turn
from tests.support.replica_services import Nginx, StubDns, unanswered
from tests.support.servers import ServerThread, free_port

ROOT = Path(__file__).parent.parent
ADDRESSES = ("127.0.0.2", "127.0.0.3")
BEFORE = (  # deploy/nginx.conf at fe3fc42, the names as nginx resolved them when it started
    "upstream toolbridge {{ server {a}:{p}; server {b}:{p}; keepalive 32; }}"
    "server {{ listen 127.0.0.1:{port}; location / {{ proxy_pass http://toolbridge; proxy_http_version 1.1;"
    " proxy_set_header Connection ''; proxy_buffering off; proxy_read_timeout 600s; }} }}"
)


def shipped(dns_port: int, replica_port: int, port: int) -> str:
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    return (conf.replace("127.0.0.11", f"127.0.0.1:{dns_port}").replace("listen 80;", f"listen 127.0.0.1:{port};")
            .replace("toolbridge:8000", f"toolbridge:{replica_port}"))


def measure(site: str, requests: int) -> list[float]:
    """Seconds per request once the second replica is gone (the first `requests` after it went)."""
    upstream = FakeUpstream(default=lambda _: Turn(content="ok"), record=False)
    port = free_port()
    dns = StubDns("toolbridge", list(ADDRESSES))
    with ExitStack() as stack, tempfile.TemporaryDirectory() as directory:
        stack.callback(dns.close)
        replicas = []
        for address in ADDRESSES:
            replicas.append(thread := ServerThread(upstream.app, port))
            thread.server.config.host = address
            thread.__enter__()
        stack.callback(replicas[0].__exit__, None, None, None)
        configure = (lambda p: shipped(dns.port, port, p)) if site == "shipped" else (
            lambda p: BEFORE.format(a=ADDRESSES[0], b=ADDRESSES[1], p=port, port=p))
        nginx = Nginx(Path(directory), [], site=configure)
        stack.callback(nginx.stop)
        for _ in range(4):  # both replicas in use: nginx has resolved both addresses
            httpx.get(f"{nginx.url}/v1/models", timeout=10).raise_for_status()
        replicas[1].__exit__(None, None, None)  # scaled down: gone, and the DNS names one replica
        dns.addresses = [ADDRESSES[0]]
        stack.enter_context(unanswered(ADDRESSES[1], port))
        seconds = []
        with httpx.Client(timeout=120) as client:
            for _ in range(requests):
                started = time.perf_counter()
                response = client.get(f"{nginx.url}/v1/models")
                seconds.append(time.perf_counter() - started)
                print(f"  {site}: {response.status_code} in {seconds[-1]:.3f} s", flush=True)
        return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=12)
    parser.add_argument("--before", action="store_true", help="also the config before issue 27 (slow)")
    options = parser.parse_args()
    for site in (["before"] if options.before else []) + ["shipped"]:
        seconds = measure(site, options.requests)
        print(f"{site}: {len(seconds)} requests, median {statistics.median(seconds):.3f} s, "
              f"max {max(seconds):.3f} s, total {sum(seconds):.1f} s")


if __name__ == "__main__":
    main()
