"""The upstream model server, the only HTTP to it: the client the gateway uses and the transport it rides on.

Inside: transport.py (the pool, sending, failures in the gateway's errors), capabilities.py (what the
server is and its models can do), chunks.py (a chat answer read into chunks), relay.py (pass-through
bodies), and the pure helpers paths.py, sse.py, failures.py.
"""

from app.upstream.capabilities import ServerKind
from app.upstream.client import ProxiedResponse, Transport, TransportKind, UpstreamClient, make_transport

__all__ = ["ProxiedResponse", "ServerKind", "Transport", "TransportKind", "UpstreamClient", "make_transport"]
