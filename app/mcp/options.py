"""The options of an MCP pool, built once from the settings (lifespan.py) and read by each server's
supervisor (supervisor.py)."""

import os
from dataclasses import dataclass, field

from app.mcp.connect import START_TURN_SECONDS
from app.mcp.convert import ConversionOptions
from app.mcp.held_calls import HeldCalls
from app.mcp.stdio import DEFAULT_MAX_MESSAGE_BYTES
from app.mcp.task_book import TaskBook
from app.mcp.trusted import TrustedDefinitions
from app.openai.result_format import RenderOptions

# How often a 2025-era remote session is pinged to learn that it is gone before a call does.
KEEPALIVE_INTERVAL = 30.0
# The first wait before reconnecting after a failed start; it doubles with each failure (supervisor.py).
RETRY_FIRST = 1.0


@dataclass(frozen=True)
class PoolOptions:
    """What every server of a pool shares: time limits, restarts, and how tools and results are shown."""

    connect_timeout: float
    call_timeout: float
    call_timeout_max: float | None = None  # with progress; `call_timeout` when unset
    conversion: ConversionOptions = field(default_factory=ConversionOptions)
    rendering: RenderOptions = field(default_factory=RenderOptions)
    retry: bool = True
    retry_first: float = RETRY_FIRST
    block_changed_tools: bool = False
    keepalive_interval: float = KEEPALIVE_INTERVAL
    sampling_model: str | None = None
    start_slots: int = field(default_factory=lambda: os.cpu_count() or 1)  # stdio servers starting at once
    start_turn: float = START_TURN_SECONDS  # the longest one of them keeps the next waiting
    task_wait: float = 10.0  # a tool run as an MCP task is waited for this long in its request (tasks.py)
    task_book: TaskBook | None = field(default=None, compare=False)  # each key's tasks, for the status page
    resource_tools: bool = True  # a `read_resource` tool for each server with resources (resources.py)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # one message a stdio server may send (stdio.py)
    # The calls waiting for people on all the servers, counted together for their bounds (held_calls.py).
    held: HeldCalls = field(default_factory=HeldCalls, compare=False)
    # Each tool's definition pinned when first seen (trusted.py); None: TOOLBRIDGE_PIN_TOOLS=false.
    trusted: TrustedDefinitions | None = field(default=None, compare=False)

    @property
    def longest_call_timeout(self) -> float:
        return self.call_timeout_max or self.call_timeout
