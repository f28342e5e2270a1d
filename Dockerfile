# The SGAM image: the `sgam` command, the Celery worker and beat, and the HTTP API (`sgam serve`)
# on port 8080 (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY pipeline ./pipeline
COPY schemas ./schemas
COPY workers ./workers
COPY prompts ./prompts
RUN pip install . \
 && useradd --create-home --uid 10001 sgam \
 && mkdir -p /var/lib/sgam/beat && chown -R sgam /var/lib/sgam
USER sgam
EXPOSE 8080
WORKDIR /var/lib/sgam
CMD ["sgam", "--help"]
