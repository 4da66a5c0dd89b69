# Production image: gunicorn behind your proxy, static files served by whitenoise.
# DATABASE_URL and SECRET_KEY are required at run time; run the worker and the sweeper as
# separate containers from the same image (see README, "Operations").
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
RUN SECRET_KEY=collectstatic-only DATABASE_URL=postgres://build@localhost/build \
    python manage.py collectstatic --noinput \
 && useradd --system --uid 10001 --home /app acurio \
 && chown -R acurio /app/staticfiles

USER acurio
EXPOSE 8000
# Migrations run as a release step: docker run IMAGE python manage.py migrate
CMD ["gunicorn", "acurio.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-", "--graceful-timeout", "30"]
