# Flag Atlas: two stages. The build stage installs the Python package (with the PostgreSQL
# driver) into a virtual environment and copies htmx from its npm package; the runtime stage
# has Python, git (the ingest reads a repository through it) and that environment only: no
# compiler, no Node, no dev tools. It runs as an unprivileged user and has a health check.
#
#   docker build -t flagatlas .
#   docker run -p 8000:8000 -v flagatlas-data:/data flagatlas
#   (offline: -v /path/to/sglang:/sglang:ro -e SGLANG_REPO=/sglang)
# Without Docker Hub, pass a Debian bookworm image of your own as BASE (scripts/test-image.sh
# makes one with debootstrap). Few instructions on purpose: with the vfs storage driver
# (Docker inside a container) every instruction copies the whole file system.
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv npm ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY . /app
# htmx from the npm registry, pinned by package-lock.json (what `make` copies too); the
# package installed editable, so templates/ and static/ are found beside the code in /app.
# npm and pip bring CA lists of their own: point both at the system's trust store.
RUN cd /app \
    && export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
              PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
              PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    && npm ci --no-audit --no-fund --silent \
    && mkdir -p static/vendor \
    && cp node_modules/htmx.org/dist/htmx.min.js static/vendor/htmx.min.js \
    && rm -rf node_modules /root/.npm \
    && python3 -m venv .venv \
    && .venv/bin/pip install -q -e '.[postgres]' \
    && find /app -name __pycache__ -prune -exec rm -rf {} +

FROM ${BASE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && git config --system --add safe.directory '*' \
    && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin flagatlas \
    && mkdir -p /data && chown flagatlas: /data
COPY --from=build /app /app
ENV PATH=/app/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    FLAGATLAS_DB=/data/flagatlas.db \
    FLAGATLAS_INDEX=/data/search \
    SGLANG_REPO=https://github.com/sgl-project/sglang.git \
    PYTHONDONTWRITEBYTECODE=1 \
    PORT=8000
USER flagatlas
WORKDIR /data
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request as u; u.urlopen(f'http://127.0.0.1:{os.environ[\"PORT\"]}/api/versions', timeout=4)"]
# With SQLite in /data (mount a volume there): ingest on first start (no database file
# yet), then serve with one worker per core. With DATABASE_URL (compose.yaml) another
# container ingests.
CMD ["sh", "-c", "[ -n \"$DATABASE_URL\" ] || [ -s \"$FLAGATLAS_DB\" ] || flagatlas ingest --repo \"$SGLANG_REPO\" || exit 1; exec flagatlas serve --host 0.0.0.0 --port \"$PORT\""]
