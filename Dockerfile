# One image for the web server and the Celery worker; configured only by environment variables.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app

COPY pyproject.toml README.md ./
COPY anonymizer_site ./anonymizer_site
COPY releases ./releases
COPY templates ./templates
COPY static ./static
COPY manage.py ./
RUN pip install --no-cache-dir . \
 && DEBUG=1 python manage.py collectstatic --noinput \
 && useradd --create-home --uid 1000 anonymizer \
 && mkdir -p /data/media && chown -R anonymizer /data

USER anonymizer
ENV MEDIA_ROOT=/data/media VAR_DIR=/data DEBUG=0
EXPOSE 8000
CMD ["gunicorn", "anonymizer_site.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", "--timeout", "120"]
