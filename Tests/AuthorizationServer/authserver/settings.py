"""Settings of the test-only authorization server.

Everything a test may want to change comes from environment variables, which scripts/auth-server sets
from the KEY=VALUE arguments of `start` and `restart`. Nothing here is fit for production: the secret
key is fixed, passwords are hashed with MD5 (so a password grant costs microseconds, not half a
second) and there is no CSRF protection.
"""

import os
from pathlib import Path


def _int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def _bool(name, default):
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={value!r} is not a boolean")


STATE_DIR = Path(os.environ["SESSIONKIT_AUTH_STATE"])
BASE_URL = os.environ.get("SESSIONKIT_AUTH_BASE_URL", "http://127.0.0.1")

SECRET_KEY = "sessionkit-test-server-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "authserver.urls"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]

# No CsrfViewMiddleware: the /test/ endpoints take JSON posts from test code, and DOT's own endpoints
# are csrf_exempt where they must be.
MIDDLEWARE = [
    "authserver.middleware.TestSupportMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(STATE_DIR / "db.sqlite3"),
        "OPTIONS": {
            # The server is threaded: writers queue on the lock instead of failing, and IMMEDIATE
            # transactions take the write lock up front, so two rotations cannot deadlock upgrading.
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        },
    }
}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGIN_URL = "/test/login-required"

OAUTH2_PROVIDER = {
    "ACCESS_TOKEN_EXPIRE_SECONDS": _int("ACCESS_TOKEN_EXPIRE_SECONDS", 3600),
    "REFRESH_TOKEN_EXPIRE_SECONDS": _int("REFRESH_TOKEN_EXPIRE_SECONDS", 0) or None,
    "ROTATE_REFRESH_TOKEN": _bool("ROTATE_REFRESH_TOKEN", True),
    "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": _int("REFRESH_TOKEN_GRACE_PERIOD_SECONDS", 0),
    "REFRESH_TOKEN_REUSE_PROTECTION": _bool("REFRESH_TOKEN_REUSE_PROTECTION", False),
    "DEVICE_FLOW_INTERVAL": _int("DEVICE_FLOW_INTERVAL", 1),
    "OAUTH_DEVICE_VERIFICATION_URI": BASE_URL + "/o/device/",
    "PKCE_REQUIRED": True,
    "SCOPES": {"read": "Read", "write": "Write", "introspection": "Introspect tokens"},
    "DEFAULT_SCOPES": ["read", "write"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        # The password grant is test-only here; DOT's RFC 9700 reminder on every use would drown the log.
        "no_password_grant_nag": {
            "()": "django.utils.log.CallbackFilter",
            "callback": lambda record: "PASSWORD_GRANT" not in record.getMessage(),
        }
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "oauth2_provider": {"handlers": ["stderr"], "level": "INFO", "filters": ["no_password_grant_nag"], "propagate": False},
        "django.server": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        "django.request": {"handlers": ["stderr"], "level": "ERROR", "propagate": False},
    },
}
