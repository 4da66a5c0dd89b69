# Production image: gunicorn behind your TLS-terminating proxy, static files served by whitenoise.
# Required at run time: DATABASE_URL, SECRET_KEY (at least 50 random characters:
#   python -c 'import secrets; print(secrets.token_urlsafe(50))'), ALLOWED_HOSTS (the site's name).
# The site is HTTPS only by default (redirect, HSTS, secure cookies): the proxy must set
# X-Forwarded-Proto. A proxy that redirects by itself and sets no such header:
# SECURE_SSL_REDIRECT=0 ACURIO_TRUST_X_FORWARDED_PROTO=0. With one proxy in front, set
# ACURIO_TRUSTED_PROXIES=1 so sign-in throttling sees client addresses. EMAIL_URL enables
# password reset. Run the worker and the sweeper as separate containers from the same image
# (`python manage.py worker --concurrency 3`: more threads than ACURIO_LARGE_ANALYSIS_SLOTS, so
# small theses never wait for large ones; `python manage.py sweeper`; see README, "Operations"
# and "Security settings in production").
FROM python:3.13-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ACURIO_REQUIRE_DATABASE_URL=1

WORKDIR /app

COPY requirements.txt .
RUN pip install -r requirements.txt

COPY . .
# Settings need a secret and a database URL to import; neither is used by collectstatic.
RUN SECRET_KEY=collectstatic-only-not-a-secret-long-enough-for-the-fifty-character-rule \
    DATABASE_URL=postgres://build@localhost/build \
    python manage.py collectstatic --noinput \
 && useradd --system --uid 10001 --home /app acurio \
 && chown -R acurio /app/staticfiles \
 && mkdir -p /tmp/acurio-metrics \
 && chown acurio /tmp/acurio-metrics

# gunicorn's workers are processes of their own: each writes its counters here and /metrics
# adds them up (prometheus-client's multiprocess mode; README, "Metrics"). One directory per
# container, never shared between containers (process ids repeat from one container to the
# next); the default command empties it before gunicorn starts. Worker and sweeper containers
# serve their own counters with --metrics-port.
ENV PROMETHEUS_MULTIPROC_DIR=/tmp/acurio-metrics

USER acurio
EXPOSE 8000
# Migrations run as a release step: docker run IMAGE python manage.py migrate
CMD ["sh", "-c", "rm -f \"$PROMETHEUS_MULTIPROC_DIR\"/*.db; exec gunicorn acurio.wsgi --bind 0.0.0.0:8000 --workers 3 --access-logfile - --graceful-timeout 30"]
