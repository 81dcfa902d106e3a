# toolbridge: slim, non-root, with node/npx and uv/uvx so npx- and uvx-launched MCP servers work.
FROM python:3.11-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm ca-certificates \
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

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('TOOLBRIDGE_PORT', '8000'), timeout=4)"]

# exec form: the gateway is PID 1's child-free target of SIGTERM and shuts its MCP servers down.
CMD ["toolbridge"]
