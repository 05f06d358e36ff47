"""Settings for Anonymizer, read from the environment.

With nothing set, the app runs on one machine with safe defaults: DEBUG off, a secret key
generated once under ``var/``, an SQLite file under ``var/`` and a Redis on localhost.
``make run`` asks for DEBUG. Production sets at least ``SECRET_KEY``, ``ALLOWED_HOSTS`` and
``DATABASE_URL`` (see README).
"""

import json
import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)

VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))


def local_secret_key(path: Path) -> str:
    """A key generated on first use and kept outside the repository (mode 0600).

    Enough for one machine; several web processes on several machines must share one
    SECRET_KEY from the environment."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process won the race: use its key
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


SECRET_KEY = os.environ.get("SECRET_KEY", "") or local_secret_key(VAR_DIR / "secret-key")
if len(SECRET_KEY) < 32:
    raise ImproperlyConfigured("SECRET_KEY is too short: use at least 32 random characters.")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "axes",
    # The HTTP API (releases/api/); listed so its docs page uses ninja's bundled Swagger UI
    # files (served from STATIC_URL), never a CDN.
    "ninja",
    "releases",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page requires login; the login page itself is exempt (login_not_required).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Ends idle and too old sessions; no signed-in page is cached (releases/core/sessions.py).
    "releases.core.sessions.SessionLimitsMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its lockout response.
    "axes.middleware.AxesMiddleware",
]

if not DEBUG:
    # Production serves collected static files from the app; development uses runserver's.
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "anonymizer_site.urls"

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
                "releases.context_processors.roles",
            ],
        },
    },
]

WSGI_APPLICATION = "anonymizer_site.wsgi.application"

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}", conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web process and the Celery worker share the file: WAL lets readers run beside the
    # writer, IMMEDIATE transactions avoid "database is locked" on upgrade from read to write.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file (not in-memory) test database, so a real worker process can share it.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get("TEST_DATABASE_NAME", str(VAR_DIR / "test-db.sqlite3"))
    }

# Behind a TLS-terminating proxy (docker-compose.yml): the proxy's X-Forwarded-Proto and
# X-Forwarded-For are trusted, plain HTTP is redirected and HSTS sent (see below).
BEHIND_TLS_PROXY = env_bool("BEHIND_TLS_PROXY", False)

# Failed sign-ins (django-axes records each; releases/accounts/ decides, see
# docs/guide-administrator.md). An address is throttled, not a person: after
# LOGIN_FAILURE_LIMIT failures from one address within LOGIN_FAILURE_MEMORY_HOURS, that address
# waits LOGIN_DELAY_MINUTES before its next try, twice as long after each further failure, at most
# LOGIN_MAX_DELAY_MINUTES; the right password from another address still works. A user name is
# locked only when failures for it come from LOGIN_USERNAME_LOCK_IPS distinct addresses; an
# administrator releases it (admin -> Locked user names) or its owner does, by resetting the
# password through the e-mailed link.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "releases.accounts.handler.ThrottleHandler"
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "5"))
LOGIN_DELAY_MINUTES = float(os.environ.get("LOGIN_DELAY_MINUTES", "1"))
LOGIN_MAX_DELAY_MINUTES = float(os.environ.get("LOGIN_MAX_DELAY_MINUTES", "60"))
LOGIN_FAILURE_MEMORY_HOURS = float(os.environ.get("LOGIN_FAILURE_MEMORY_HOURS", "24"))
LOGIN_USERNAME_LOCK_IPS = int(os.environ.get("LOGIN_USERNAME_LOCK_IPS", "10"))
# The progressive delay of the request's address (axes calls it with the request).
AXES_COOLOFF_TIME = "releases.accounts.throttle.cool_off"
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
# A sign-in refused during a delay or a lock is not one more failure (it would lengthen the wait).
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "releases.accounts.views.locked_out"
# The client's address (request.axes_ip_address, the one place it is taken from): the socket's,
# or behind the TLS proxy the address that proxy appended to X-Forwarded-For. A header a client
# can write must never decide whose failures count.
AXES_CLIENT_IP_CALLABLE = "releases.accounts.throttle.client_address"

# Content-Security-Policy (django-csp): the pages load scripts and styles from the app only;
# no inline script or style is allowed (the templates have none).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "releases:home"
LOGOUT_REDIRECT_URL = "login"

# Single sign-on with OpenID Connect (mozilla-django-oidc; docs/sso.md). Off by default: `make run`
# needs no identity provider. LOCAL_LOGIN_ENABLED off makes the provider the only way in.
OIDC_ENABLED = env_bool("OIDC_ENABLED", False)
LOCAL_LOGIN_ENABLED = env_bool("LOCAL_LOGIN_ENABLED", True)
# The name on the login page's button ("Sign in with ...").
OIDC_PROVIDER_NAME = os.environ.get("OIDC_PROVIDER_NAME", "single sign-on").strip()
# The provider's discovery document (.../.well-known/openid-configuration), read at the first
# sign-in, not at start-up (a provider that is down must not stop the app). Each OIDC_OP_*
# endpoint set here replaces the discovered one; with all of them set no discovery is needed.
OIDC_DISCOVERY_URL = os.environ.get("OIDC_DISCOVERY_URL", "").strip()
OIDC_OP_ISSUER = os.environ.get("OIDC_OP_ISSUER", "").strip()
OIDC_OP_AUTHORIZATION_ENDPOINT = os.environ.get("OIDC_OP_AUTHORIZATION_ENDPOINT", "").strip()
OIDC_OP_TOKEN_ENDPOINT = os.environ.get("OIDC_OP_TOKEN_ENDPOINT", "").strip()
OIDC_OP_USER_ENDPOINT = os.environ.get("OIDC_OP_USER_ENDPOINT", "").strip()
OIDC_OP_JWKS_ENDPOINT = os.environ.get("OIDC_OP_JWKS_ENDPOINT", "").strip()
OIDC_OP_LOGOUT_ENDPOINT = os.environ.get("OIDC_OP_LOGOUT_ENDPOINT", "").strip()
OIDC_RP_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = os.environ.get("OIDC_CLIENT_SECRET", "")
OIDC_RP_SIGN_ALGO = os.environ.get("OIDC_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = os.environ.get("OIDC_SCOPES", "openid email profile")
# Seconds to wait for the provider (discovery, token, user info, keys) before saying it is down.
OIDC_TIMEOUT = float(os.environ.get("OIDC_TIMEOUT_SECONDS", "5"))
# Kept in the session for the provider's logout (id_token_hint).
OIDC_STORE_ID_TOKEN = True
OIDC_USE_NONCE = True
# PKCE (S256) on top of the client secret: what Keycloak, Entra ID and the OAuth 2.1 draft ask for.
OIDC_USE_PKCE = True
# The claim that lists the user's groups, and which group gives which role in which project:
# "idp-group=project-slug:role,..." (roles: steward, officer, recipient, admin).
OIDC_GROUP_CLAIM = os.environ.get("OIDC_GROUP_CLAIM", "groups").strip()
#: The roles a mapping may name (the same as Membership.Role; a test keeps them so).
OIDC_ROLE_NAMES = ("steward", "officer", "recipient", "admin")


def parse_group_roles(text: str) -> tuple[tuple[str, str, str], ...]:
    """ "group=project:role,..." as (group, project slug, role) triples; a clear error when bad."""
    mapping: list[tuple[str, str, str]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        group, equals, target = item.rpartition("=")
        slug, colon, role = target.partition(":")
        group, slug, role = group.strip(), slug.strip(), role.strip()
        if not (equals and colon and group and slug and role):
            raise ImproperlyConfigured(
                f"OIDC_GROUP_ROLES: {item!r} is not of the form group=project-slug:role."
            )
        if role not in OIDC_ROLE_NAMES:
            raise ImproperlyConfigured(
                f"OIDC_GROUP_ROLES: {item!r} names the role {role!r}; "
                f"the roles are {', '.join(OIDC_ROLE_NAMES)}."
            )
        mapping.append((group, slug, role))
    return tuple(mapping)


OIDC_GROUP_ROLES = parse_group_roles(os.environ.get("OIDC_GROUP_ROLES", ""))
if OIDC_ENABLED:
    if not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
        raise ImproperlyConfigured("OIDC_ENABLED needs OIDC_CLIENT_ID and OIDC_CLIENT_SECRET.")
    if not (OIDC_DISCOVERY_URL or (OIDC_OP_AUTHORIZATION_ENDPOINT and OIDC_OP_TOKEN_ENDPOINT)):
        raise ImproperlyConfigured(
            "OIDC_ENABLED needs OIDC_DISCOVERY_URL (or the OIDC_OP_*_ENDPOINT settings)."
        )
    AUTHENTICATION_BACKENDS.append("releases.accounts.oidc.Backend")
    # The sign-in button's and the logout's forms are answered by a redirect to the provider:
    # browsers check that redirect against form-action too.
    for _url in (OIDC_DISCOVERY_URL, OIDC_OP_AUTHORIZATION_ENDPOINT, OIDC_OP_LOGOUT_ENDPOINT):
        _origin = "/".join(_url.split("/")[:3]) if "://" in _url else ""
        if _origin and _origin not in CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"]:
            CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"].append(_origin)
if not LOCAL_LOGIN_ENABLED:
    if not OIDC_ENABLED:
        raise ImproperlyConfigured(
            "LOCAL_LOGIN_ENABLED is off and OIDC_ENABLED too: nobody could sign in."
        )
    # No password is checked anywhere, the admin's login included (the provider's backend
    # still answers permission questions: it is a ModelBackend).
    AUTHENTICATION_BACKENDS = ["releases.accounts.oidc.Backend"]

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", BASE_DIR / "staticfiles"))

# Uploads and extracts live under MEDIA_ROOT and are never served from a URL: no MEDIA_URL
# route exists, downloads go through a view that checks approval and logs.
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", VAR_DIR / "media"))
MEDIA_URL = "/no-public-media/"

# Where uploads, column stores and extracts are kept (the "private" storage): "local" (the
# folder MEDIA_ROOT, the default) or "s3" (S3-compatible object storage: AWS S3, MinIO, Ceph),
# so web processes and workers on several machines share them.
FILE_STORAGE = os.environ.get("FILE_STORAGE", "local").strip().lower()
if FILE_STORAGE == "s3":
    PRIVATE_STORAGE: dict[str, Any] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": os.environ.get("S3_BUCKET", ""),
            "endpoint_url": os.environ.get("S3_ENDPOINT_URL") or None,
            "region_name": os.environ.get("S3_REGION") or None,
            "access_key": os.environ.get("S3_ACCESS_KEY_ID") or None,
            "secret_key": os.environ.get("S3_SECRET_ACCESS_KEY") or None,
            "location": os.environ.get("S3_PREFIX", "").strip("/"),
            "default_acl": "private",
            "file_overwrite": False,
            "querystring_auth": True,
            "addressing_style": os.environ.get("S3_ADDRESSING_STYLE") or None,
        },
    }
    if not PRIVATE_STORAGE["OPTIONS"]["bucket_name"]:
        raise ImproperlyConfigured("FILE_STORAGE=s3 needs S3_BUCKET.")
elif FILE_STORAGE == "local":
    # No location option: the folder follows MEDIA_ROOT (which tests change).
    PRIVATE_STORAGE = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
else:
    raise ImproperlyConfigured(f"FILE_STORAGE must be 'local' or 's3', not {FILE_STORAGE!r}.")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "private": PRIVATE_STORAGE,
}

# Largest upload accepted, in bytes (default 1 GB). Uploads are streamed to a temporary file
# (FILE_UPLOAD_TEMP_DIR, default the system's) and copied to MEDIA_ROOT in chunks, never held
# in the web process's memory.
MAX_UPLOAD_BYTES = int(os.environ.get("MAX_UPLOAD_BYTES", 1024 * 1024 * 1024))
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_HANDLERS = ["django.core.files.uploadhandler.TemporaryFileUploadHandler"]
FILE_UPLOAD_TEMP_DIR = os.environ.get("FILE_UPLOAD_TEMP_DIR") or None

# Bounds on what a file may hold, checked while it is read (each refusal names its setting):
# bytes of text once expanded (an Excel file is a zip; Parquet is compressed), rows, columns,
# bytes in one cell, and how many times a zip member may expand (100, as Apache POI allows).
MAX_UNCOMPRESSED_BYTES = int(os.environ.get("MAX_UNCOMPRESSED_BYTES", 4 * 1024**3))
MAX_ROWS = int(os.environ.get("MAX_ROWS", 20_000_000))
MAX_COLUMNS = int(os.environ.get("MAX_COLUMNS", 5_000))
MAX_CELL_BYTES = int(os.environ.get("MAX_CELL_BYTES", 1024 * 1024))
MAX_COMPRESSION_RATIO = float(os.environ.get("MAX_COMPRESSION_RATIO", 100))
# A hierarchy (uploaded, or built on a column's values) is parsed in the web process and kept
# in every request made with it: bounded in bytes and rows (a value per row).
MAX_HIERARCHY_BYTES = int(os.environ.get("MAX_HIERARCHY_BYTES", 20 * 1024**2))
MAX_HIERARCHY_ROWS = int(os.environ.get("MAX_HIERARCHY_ROWS", 100_000))

# Sources registered in place (``manage.py register_dataset``, POST /api/v1/datasets/register;
# see docs/guide-administrator.md), read where they stay, within the same bounds as uploads.
# DATA_IMPORT_DIRS: server folders (comma-separated) whose files a site administrator may
# register; a path is resolved (symbolic links, "..") and must stay inside one of them.
DATA_IMPORT_DIRS = env_list("DATA_IMPORT_DIRS", "")
# Object storage: the buckets that may be registered from (none: S3 sources are off), and the
# client's endpoint, region and credentials (unset: boto3's own chain, e.g. an instance role).
SOURCE_S3_BUCKETS = env_list("SOURCE_S3_BUCKETS", "")
SOURCE_S3_ENDPOINT_URL = os.environ.get("SOURCE_S3_ENDPOINT_URL") or None
SOURCE_S3_REGION = os.environ.get("SOURCE_S3_REGION") or None
SOURCE_S3_ACCESS_KEY_ID = os.environ.get("SOURCE_S3_ACCESS_KEY_ID") or None
SOURCE_S3_SECRET_ACCESS_KEY = os.environ.get("SOURCE_S3_SECRET_ACCESS_KEY") or None
# PostgreSQL databases that may be registered from, by name: a JSON object of name to
# connection URL, e.g. {"warehouse": "postgresql://reader@db.example/warehouse"}. Keep the
# password out of the URL (libpq reads PGPASSWORD or ~/.pgpass); use a role that may only read.
try:
    SOURCE_DATABASES: dict[str, str] = json.loads(os.environ.get("SOURCE_DATABASES") or "{}")
except json.JSONDecodeError as exc:
    raise ImproperlyConfigured(f"SOURCE_DATABASES is not a JSON object: {exc}") from None
if not isinstance(SOURCE_DATABASES, dict) or not all(
    isinstance(v, str) for v in SOURCE_DATABASES.values()
):
    raise ImproperlyConfigured("SOURCE_DATABASES must map names to connection URLs (strings).")

# Largest release extract (rows x columns) also written as Excel: an .xlsx is written cell by
# cell (tens of thousands of cells a second); past this the package holds CSV and Parquet.
XLSX_MAX_CELLS = int(os.environ.get("XLSX_MAX_CELLS", 2_000_000))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# A broker that does not answer fails a send within seconds instead of hanging the request;
# the message stays in the outbox (services.dispatch) and goes out when Redis is back.
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 3, "socket_timeout": 5}
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
}
# Bounds on one task: a soft limit the task turns into a clear failure, a hard limit that
# kills it, and a pool process replaced once it has grown past the memory ceiling (KiB).
CELERY_TASK_SOFT_TIME_LIMIT = int(os.environ.get("TASK_SOFT_TIME_LIMIT", "1800"))
CELERY_TASK_TIME_LIMIT = int(
    os.environ.get("TASK_TIME_LIMIT", str(CELERY_TASK_SOFT_TIME_LIMIT + 120))
)
# 512: a pool process keeps what a large task allocated (the allocators hold on to it); past
# this it is replaced after its task, so the next run starts from a fresh process.
WORKER_MAX_MEMORY_MB = int(os.environ.get("WORKER_MAX_MEMORY_MB", "512"))
CELERY_WORKER_MAX_MEMORY_PER_CHILD = WORKER_MAX_MEMORY_MB * 1024
# A hard ceiling on each pool process's memory (its data segment, RLIMIT_DATA): an allocation
# past it raises MemoryError, which the run or profiling reports naming this setting, instead
# of the machine's out-of-memory killer ending a process. 0: no ceiling.
WORKER_MEMORY_LIMIT_MB = int(os.environ.get("WORKER_MEMORY_LIMIT_MB", "4096"))
# Leases: running work renews a heartbeat every HEARTBEAT_SECONDS; work silent for
# LEASE_SECONDS lost its worker and is retried (up to WORK_MAX_ATTEMPTS runs) or failed.
HEARTBEAT_SECONDS = float(os.environ.get("HEARTBEAT_SECONDS", "10"))
LEASE_SECONDS = float(os.environ.get("LEASE_SECONDS", "60"))
WORK_MAX_ATTEMPTS = int(os.environ.get("WORK_MAX_ATTEMPTS", "2"))
# Work still waiting for a worker this long after its message went out is sent again
# (a broker restarted without its queue); a repeat is harmless.
REDELIVER_SECONDS = float(os.environ.get("REDELIVER_SECONDS", "120"))
# Celery beat runs the sweeper that finishes what dead workers and lost messages left behind.
SWEEP_SECONDS = float(os.environ.get("SWEEP_SECONDS", "30"))
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Apache Spark for the row-growing parts of a run (releases/engine/spark.py): a standalone
# master ("spark://host:7077") or "local[N]"; empty: the engine runs in the worker's process.
SPARK_MASTER = os.environ.get("SPARK_MASTER", "").strip()
# Seconds to wait for the master to answer before a run fails with a clear reason.
SPARK_CONNECT_SECONDS = float(os.environ.get("SPARK_CONNECT_SECONDS", "10"))
# Sent messages stay in the outbox this many days (to inspect what was sent), then beat
# deletes them once a day.
OUTBOX_RETENTION_DAYS = float(os.environ.get("OUTBOX_RETENTION_DAYS", "7"))
# The sign-in log and the log of failed sign-ins are kept this many days, then purged daily.
LOGIN_RECORD_RETENTION_DAYS = float(os.environ.get("LOGIN_RECORD_RETENTION_DAYS", "90"))
CELERY_BEAT_SCHEDULE = {
    "sweep-work": {"task": "releases.sweep_work", "schedule": float(SWEEP_SECONDS)},
    "purge-outbox": {"task": "releases.purge_outbox", "schedule": 24 * 3600.0},
    "purge-login-records": {"task": "releases.purge_login_records", "schedule": 24 * 3600.0},
    "send-digests": {"task": "releases.send_digests", "schedule": 24 * 3600.0},
}
# A worker that dies hands its task back to the queue; the services' claims keep it single.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Test-only fault injection (off unless set): work pauses WORK_PAUSE_SECONDS at the first
# progress stage whose name contains WORK_PAUSE_AT, so a fault test can kill or cancel it there.
WORK_PAUSE_AT = os.environ.get("WORK_PAUSE_AT", "")
WORK_PAUSE_SECONDS = float(os.environ.get("WORK_PAUSE_SECONDS", "5"))

# Independent approvals a release needs before it can be downloaded.
REQUIRED_APPROVALS = int(os.environ.get("REQUIRED_APPROVALS", "1"))

# The data sharing agreement a request starts with (the steward may write another); every
# recipient accepts it before the first download.
DEFAULT_DATA_SHARING_TERMS = os.environ.get("DEFAULT_DATA_SHARING_TERMS", "").strip() or (
    "The recipient uses this extract only for the purpose agreed with the data owner, keeps it "
    "on systems protected against unauthorised access, and shares it with nobody else. The "
    "recipient makes no attempt to re-identify any person, to link the extract with other data "
    "in order to do so, or to contact anyone it may concern; a person recognised by chance is "
    "reported to the data owner and not named to anyone. The recipient deletes the extract "
    "when the purpose is served, when the release expires or when the data owner revokes it, "
    "and tells the data owner at once of any breach of these terms."
)

# Personal access tokens of the HTTP API (docs/api.md): a new token lasts API_TOKEN_DAYS
# unless its creator says otherwise, and never more than API_TOKEN_MAX_DAYS.
API_TOKEN_DAYS = int(os.environ.get("API_TOKEN_DAYS", "90"))
API_TOKEN_MAX_DAYS = int(os.environ.get("API_TOKEN_MAX_DAYS", "365"))
# Requests one token (or, without a valid token, one address) may make: "N/s", "N/min",
# "N/hour" or "N/day". Counted in Django's cache (per process unless CACHES is shared).
API_RATE_LIMIT = os.environ.get("API_RATE_LIMIT", "120/min")
# At most this many items in one page of an API list (``limit``).
API_MAX_PAGE_SIZE = int(os.environ.get("API_MAX_PAGE_SIZE", "100"))

# Decisions are e-mailed to the requester; development prints them on the console.
EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend",
)
# The file backend (tests, demos) writes each message into EMAIL_FILE_PATH.
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "anonymizer@localhost")
# The address people open the app at, for links in e-mails.
# Webhooks (docs/webhooks.md): each POST waits at most WEBHOOK_TIMEOUT_SECONDS; a failed one
# is tried again after WEBHOOK_RETRY_SECONDS, doubling each time, WEBHOOK_MAX_ATTEMPTS in all.
WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("WEBHOOK_TIMEOUT_SECONDS", "5"))
WEBHOOK_RETRY_SECONDS = float(os.environ.get("WEBHOOK_RETRY_SECONDS", "30"))
WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("WEBHOOK_MAX_ATTEMPTS", "6"))
# The named recipients of an approved release are reminded this many days before it expires.
RELEASE_EXPIRY_REMINDER_DAYS = int(os.environ.get("RELEASE_EXPIRY_REMINDER_DAYS", "7"))

SITE_URL = os.environ.get("SITE_URL", "http://127.0.0.1:8000").rstrip("/")

SESSION_COOKIE_HTTPONLY = True
# A session ends after SESSION_IDLE_MINUTES without a request, and SESSION_MAX_HOURS after
# sign-in whatever the activity (releases/core/sessions.py).
SESSION_IDLE_MINUTES = float(os.environ.get("SESSION_IDLE_MINUTES", "30"))
SESSION_MAX_HOURS = float(os.environ.get("SESSION_MAX_HOURS", "12"))
SESSION_COOKIE_AGE = int(SESSION_MAX_HOURS * 3600)
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    # Behind a TLS-terminating proxy: trust its X-Forwarded-Proto, and by default redirect plain
    # HTTP and send HSTS for a year (each can still be set on its own).
    if BEHIND_TLS_PROXY:
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", BEHIND_TLS_PROXY)
    SECURE_HSTS_SECONDS = int(
        os.environ.get("SECURE_HSTS_SECONDS", "31536000" if BEHIND_TLS_PROXY else "0")
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "client_errors_without_traceback": {
            "()": "anonymizer_site.logging_filters.ClientErrorsWithoutTraceback"
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "releases": {"handlers": ["console"], "level": "INFO"},
        # Handled by Django's own handlers (propagate); only the 4xx stack traces go.
        "django.request": {"filters": ["client_errors_without_traceback"]},
    },
}
