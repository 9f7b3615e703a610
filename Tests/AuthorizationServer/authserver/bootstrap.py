"""Creates the users and clients every test relies on; safe to run on an existing database."""

from django.contrib.auth import get_user_model
from oauth2_provider.models import get_application_model

USERS = {"alice": "alice-password", "bob": "bob-password"}
# The `profile` and `email` claims of the fixture users.
PROFILES = {
    "alice": dict(first_name="Alice", last_name="Liddell", email="alice@example.com"),
    "bob": dict(first_name="Bob", last_name="Builder", email="bob@example.com"),
}
REDIRECT_URI = "http://127.0.0.1/callback"
POST_LOGOUT_REDIRECT_URI = "http://127.0.0.1/signed-out"
INTROSPECTION_SECRET = "introspection-secret"
CONFIDENTIAL_SECRET = "confidential-secret"
# A client ID and secret with every character RFC 6749 §2.3.1's form-urlencoding before Basic must protect.
AWKWARD_CLIENT_ID = "awkward client:+é"
AWKWARD_SECRET = "s3:cr+t é/%=&☃"


def ensure_fixtures():
    User = get_user_model()
    for username, password in USERS.items():
        if not User.objects.filter(username=username).exists():
            User.objects.create_user(username=username, password=password, **PROFILES[username])

    Application = get_application_model()
    clients = [
        dict(client_id="password-client", name="password", authorization_grant_type=Application.GRANT_PASSWORD),
        dict(
            client_id="pkce-client",
            name="pkce",
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            # A logged-in GET /o/authorize/ redirects straight to the callback: no consent form.
            skip_authorization=True,
        ),
        dict(client_id="device-client", name="device", authorization_grant_type=Application.GRANT_DEVICE_CODE),
        # OpenID Connect clients: ID tokens signed RS256 with the server's key (OIDC_RSA_PRIVATE_KEY).
        dict(
            client_id="oidc-client",
            name="oidc",
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            post_logout_redirect_uris=POST_LOGOUT_REDIRECT_URI,
            skip_authorization=True,
            algorithm=Application.RS256_ALGORITHM,
        ),
        dict(
            client_id="oidc-device-client",
            name="oidc device",
            authorization_grant_type=Application.GRANT_DEVICE_CODE,
            algorithm=Application.RS256_ALGORITHM,
        ),
    ]
    for fields in clients:
        if not Application.objects.filter(client_id=fields["client_id"]).exists():
            Application.objects.create(client_type=Application.CLIENT_PUBLIC, client_secret="", **fields)
    confidential = [
        dict(client_id="confidential-client", name="confidential", authorization_grant_type=Application.GRANT_PASSWORD),
        dict(
            client_id="confidential-code-client",
            name="confidential code",
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            skip_authorization=True,
        ),
        dict(
            client_id="confidential-device-client",
            name="confidential device",
            authorization_grant_type=Application.GRANT_DEVICE_CODE,
        ),
    ]
    for fields in confidential:
        if not Application.objects.filter(client_id=fields["client_id"]).exists():
            Application.objects.create(
                client_type=Application.CLIENT_CONFIDENTIAL, client_secret=CONFIDENTIAL_SECRET, **fields
            )
    if not Application.objects.filter(client_id=AWKWARD_CLIENT_ID).exists():
        Application.objects.create(
            client_id=AWKWARD_CLIENT_ID,
            name="awkward",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_PASSWORD,
            client_secret=AWKWARD_SECRET,
        )
    if not Application.objects.filter(client_id="introspection-client").exists():
        Application.objects.create(
            client_id="introspection-client",
            name="introspection",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
            client_secret=INTROSPECTION_SECRET,
        )
