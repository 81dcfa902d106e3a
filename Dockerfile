# toolbridge: slim, non-root, with node/npx and uv/uvx so npx- and uvx-launched MCP servers work.
# The Debian release is pinned (trixie, Debian 13: Node.js 20), so a rebuild does not change it unseen.
# Nothing here needs a newer builder than Docker 20.10's (legacy or BuildKit) or podman/buildah 4: compose adds
# what only newer engines have (the health check's start interval).

# The gateway is installed into a virtualenv in a stage of its own: the image takes the virtualenv, and not the
# source, setuptools' build/ folder or the installer (the virtualenv's own pip installs, then removes itself).
FROM python:3.11-slim-trixie AS build
COPY pyproject.toml README.md /src/
COPY app /src/app
RUN python -m venv /opt/toolbridge \
    && /opt/toolbridge/bin/pip install --no-cache-dir /src \
    && /opt/toolbridge/bin/pip uninstall --yes pip setuptools

FROM python:3.11-slim-trixie

# tini is PID 1: it reaps the helpers MCP servers leave behind (which would stay zombies under a Python
# PID 1) and passes signals on; it works under docker run, compose and Kubernetes alike, unlike compose's
# `init: true`.
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm ca-certificates tini \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir uv

COPY --from=build /opt/toolbridge /opt/toolbridge
COPY mcp.json /config/mcp.json

RUN useradd --create-home --uid 10001 toolbridge
USER toolbridge
WORKDIR /home/toolbridge
# Conversation memory's default home; compose mounts a volume here so it survives the container.
RUN mkdir -p -m 700 /home/toolbridge/.local/share/toolbridge

# Inside a container the gateway must listen on all interfaces; publish the port on 127.0.0.1 only.
ENV PATH=/opt/toolbridge/bin:$PATH \
    TOOLBRIDGE_HOST=0.0.0.0 \
    TOOLBRIDGE_PORT=8000 \
    TOOLBRIDGE_MCP_CONFIG=/config/mcp.json \
    TOOLBRIDGE_LOG_FORMAT=json \
    PYTHONUNBUFFERED=1
EXPOSE 8000

# Every 30 s once started. docker-compose.yml probes every second until the first answer (start_interval: the
# flag for it here would make the file unbuildable before Docker Engine 25 and by podman 4).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('TOOLBRIDGE_PORT', '8000'), timeout=4)"]

# exec form: tini hands SIGTERM to the gateway alone (not to its process group: the gateway stops its MCP
# servers itself, after TOOLBRIDGE_SHUTDOWN_GRACE), so requests in flight can finish; a clean stop exits 0.
# A bare `docker stop` waits 10 s, no longer than that grace: run with `--stop-timeout 30` (compose:
# stop_grace_period).
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["toolbridge"]
