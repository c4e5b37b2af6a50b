# Flag Atlas: ingests SGLang's history on first start (when the database is empty), then
# serves the dashboard. The data directory (database, search index, git cache) is a volume.
#   docker build -t flagatlas . && docker run -p 8000:8000 -v flagatlas-data:/app/data flagatlas
#   (offline: -v /path/to/sglang:/sglang:ro -e SGLANG_REPO=/sglang)
FROM python:3.11-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends git make nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY . .
RUN make install
ENV FLAGATLAS_DB=/app/data/flagatlas.db \
    SGLANG_REPO=https://github.com/sgl-project/sglang.git
VOLUME /app/data
EXPOSE 8000
CMD ["sh", "-c", "[ -s \"$FLAGATLAS_DB\" ] || .venv/bin/flagatlas ingest --repo \"$SGLANG_REPO\" || exit 1; exec .venv/bin/flagatlas serve --host 0.0.0.0 --port 8000"]
