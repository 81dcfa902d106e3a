"""The gateway's Prometheus metrics, one registry per app (tests run many apps in one process).

Fed from where each thing happens: the request middleware (requests, latency, in flight, tokens), the
upstream client (its latency), the pool (tool calls); server states and restarts are read from the pool
when scraped, so they are never stale. Labels are bounded: routes are templates, never raw paths.
"""

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from app.ops.call_record import CallRecord
from app.ops.server_health import ServerHealth

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Request and upstream latencies: a local model takes from milliseconds (relay) to minutes (long answers).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
TOOL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
# The HTTP parser passes on some thirty methods (PROPFIND, MKCOL... with httptools; any token with h11); the
# rest are counted as one, so labels stay few.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
SERVER_STATES = ("starting", "ready", "restarting", "failed", "disabled", "stopped")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._requests = Counter("toolbridge_requests", "HTTP requests answered", ["route", "method", "status"],
                                 registry=r)
        self._latency = Histogram("toolbridge_request_duration_seconds", "Time from request to last byte",
                                  ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.in_flight = Gauge("toolbridge_requests_in_flight", "HTTP requests being handled", registry=r)
        self._upstream = Histogram("toolbridge_upstream_duration_seconds",
                                   "Time until the upstream's response headers", ["kind"],
                                   buckets=LATENCY_BUCKETS, registry=r)
        self._tool_calls = Counter("toolbridge_tool_calls", "MCP tool calls by outcome",
                                   ["server", "tool", "outcome"], registry=r)
        self._tool_latency = Histogram("toolbridge_tool_duration_seconds", "MCP tool call duration",
                                       ["server", "tool"], buckets=TOOL_BUCKETS, registry=r)
        self._tokens = Counter("toolbridge_tokens", "Tokens the upstream reported, summed over tool rounds",
                               ["direction"], registry=r)
        # Each label set's children, looked up once: `labels()` checks and converts its values and takes a lock on
        # every call. As bounded as the labels themselves (routes are templates, tools named by their servers).
        self._per_request: dict[tuple[str, str, str], tuple[Counter, Histogram]] = {}
        self._per_upstream: dict[str, Histogram] = {}
        self._per_tool: dict[tuple[str | None, str, str], tuple[Counter, Histogram]] = {}
        self._per_direction: dict[str, Counter] = {}  # made at the first tokens: no series of zeros before

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        labels = (route, method if method in METHODS else "other", str(status))
        if (request := self._per_request.get(labels)) is None:
            request = self._per_request[labels] = (self._requests.labels(*labels), self._latency.labels(route))
        request[0].inc()
        request[1].observe(seconds)

    def observe_upstream(self, kind: str, seconds: float) -> None:
        if (upstream := self._per_upstream.get(kind)) is None:
            upstream = self._per_upstream[kind] = self._upstream.labels(kind)
        upstream.observe(seconds)

    def observe_tool_call(self, call: CallRecord) -> None:
        labels = (call.server, call.tool, call.outcome)
        if (tool := self._per_tool.get(labels)) is None:
            tool = self._per_tool[labels] = (self._tool_calls.labels(*labels),
                                             self._tool_latency.labels(call.server, call.tool))
        tool[0].inc()
        tool[1].observe(call.seconds)

    def observe_tokens(self, prompt: int, completion: int) -> None:
        for direction, tokens in (("in", prompt), ("out", completion)):
            if tokens:
                if (counter := self._per_direction.get(direction)) is None:
                    counter = self._per_direction[direction] = self._tokens.labels(direction)
                counter.inc(tokens)

    def watch_servers(self, health: Callable[[], dict[str, ServerHealth]]) -> None:
        """Server states and restarts, read from `health()` at each scrape."""
        self.registry.register(_ServerCollector(health))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _ServerCollector(Collector):
    def __init__(self, health: Callable[[], dict[str, ServerHealth]]) -> None:
        self._health = health

    def collect(self) -> Iterator[GaugeMetricFamily]:
        states = GaugeMetricFamily("toolbridge_mcp_server_state", "1 for the state each MCP server is in",
                                   labels=["server", "state"])
        restarts = GaugeMetricFamily("toolbridge_mcp_server_restarts", "Times an MCP server was restarted after "
                                     "its connection was lost", labels=["server"])
        tools = GaugeMetricFamily("toolbridge_mcp_server_tools", "Tools an MCP server offers", labels=["server"])
        for name, status in self._health().items():
            for state in SERVER_STATES:
                states.add_metric([name, state], 1.0 if status["state"] == state else 0.0)
            restarts.add_metric([name], float(status.get("restarts", 0)))
            tools.add_metric([name], float(status.get("tools", 0)))
        yield from (states, restarts, tools)
