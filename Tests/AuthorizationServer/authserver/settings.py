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

# The RS256 signing key of ID tokens: scripts/auth-server generates it into the state directory when it
# starts a fresh state (restart keeps it), so no private key is ever committed.
OIDC_KEY_FILE = STATE_DIR / "oidc-key.pem"
try:
    OIDC_RSA_PRIVATE_KEY = OIDC_KEY_FILE.read_text()
except FileNotFoundError:
    raise RuntimeError(f"no {OIDC_KEY_FILE}: start the server with scripts/auth-server, which generates it") from None

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
    "SCOPES": {
        "read": "Read",
        "write": "Write",
        "introspection": "Introspect tokens",
        "openid": "OpenID Connect",
        "profile": "Name and username",
        "email": "Email address",
    },
    "DEFAULT_SCOPES": ["read", "write"],
    # OpenID Connect. The issuer is not configured (OIDC_ISS_ENDPOINT): DOT derives it from each request,
    # http://127.0.0.1:PORT/o, the same in discovery and in the ID tokens' `iss`.
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": OIDC_RSA_PRIVATE_KEY,
    "OAUTH2_VALIDATOR_CLASS": "authserver.oidc.Validator",
    # RP-initiated logout: a GET to /o/logout/ with a valid id_token_hint (and client_id,
    # post_logout_redirect_uri, state) ends the Django session, deletes the user's tokens and redirects to
    # the post-logout URI without a confirmation form.
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "OIDC_RP_INITIATED_LOGOUT_DELETE_TOKENS": True,
    # http post-logout URIs are allowed for public clients (loopback apps); True would allow them only for
    # confidential ones.
    "OIDC_RP_INITIATED_LOGOUT_STRICT_REDIRECT_URIS": False,
    # An expired ID token is still a valid hint (DOT's default): apps sign out long after sign-in.
    "OIDC_RP_INITIATED_LOGOUT_ACCEPT_EXPIRED_TOKENS": True,
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
