"""The upstream model server, the only HTTP to it: the client the gateway uses and the transport it rides on.

Inside: transport.py (the pool, sending, failures in the gateway's errors), capabilities.py (what the
server is and its models can do), watch.py (whether it answers, since when, its models), last_models.py (the
last model list, served while it cannot answer), chunks.py (a chat answer read into chunks), relay.py (pass-through
bodies), and the pure helpers paths.py, sse.py, failures.py.
"""

from app.upstream.capabilities import ServerKind
from app.upstream.client import ProxiedResponse, Transport, TransportKind, UpstreamClient, make_transport
from app.upstream.last_models import ModelList
from app.upstream.watch import ModelSeen, UpstreamState

__all__ = ["ModelList", "ModelSeen", "ProxiedResponse", "ServerKind", "Transport", "TransportKind", "UpstreamClient",
           "UpstreamState", "make_transport"]
