# toolbridge: slim, non-root, with node/npx and uv/uvx so npx- and uvx-launched MCP servers work.
# The Debian release is pinned (trixie, Debian 13: Node.js 20), so a rebuild does not change it unseen.
FROM python:3.11-slim-trixie

# tini is PID 1: it reaps the helpers MCP servers leave behind (which would stay zombies under a Python
# PID 1) and passes signals on; it works under docker run, compose and Kubernetes alike, unlike compose's
# `init: true`.
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm ca-certificates tini \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir uv

WORKDIR /opt/toolbridge
COPY pyproject.toml README.md ./
COPY app ./app
RUN pip install --no-cache-dir . && mkdir -p /config
COPY mcp.json /config/mcp.json

RUN useradd --create-home --uid 10001 toolbridge
USER toolbridge
WORKDIR /home/toolbridge
# Conversation memory's default home; compose mounts a volume here so it survives the container.
RUN mkdir -p -m 700 /home/toolbridge/.local/share/toolbridge

# Inside a container the gateway must listen on all interfaces; publish the port on 127.0.0.1 only.
ENV TOOLBRIDGE_HOST=0.0.0.0 \
    TOOLBRIDGE_PORT=8000 \
    TOOLBRIDGE_MCP_CONFIG=/config/mcp.json \
    TOOLBRIDGE_LOG_FORMAT=json \
    PYTHONUNBUFFERED=1
EXPOSE 8000

# Every second until the first answer (start-interval, Docker Engine 25+), then every 30 s: whatever
# waits for "healthy" (Open WebUI, nginx) starts as soon as /health answers, not 30 s later.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --start-interval=1s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('TOOLBRIDGE_PORT', '8000'), timeout=4)"]

# exec form: tini hands SIGTERM to the gateway alone (not to its process group: the gateway stops its MCP
# servers itself, after TOOLBRIDGE_SHUTDOWN_GRACE), so requests in flight can finish. A bare `docker stop`
# waits 10 s, no longer than that grace: run with `--stop-timeout 30` (compose: stop_grace_period).
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["toolbridge"]
