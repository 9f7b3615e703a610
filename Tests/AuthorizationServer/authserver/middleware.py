"""Logs the requests tests care about and applies the fault-injection controls to them."""

import time

from django.http import JsonResponse

from oauth2_provider.models import get_access_token_model, get_device_grant_model, get_grant_model
from oauth2_provider.models import get_refresh_token_model

from . import testsupport

TOKEN_PATH = "/o/token/"
LOGGED_PREFIXES = ("/api/", TOKEN_PATH, "/o/revoke_token/", "/o/device-authorization/", "/o/introspect/")

# Set in the WSGI environ (request.META is the environ) to make serve.py close the connection
# instead of writing the response.
DROP_KEY = "sessionkit.drop_response"


def _bearer(request):
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _client_auth(request, form):
    """How the request authenticated its client: "basic", "post" (client_secret in the form), "basic+post" or
    "none". Never the secret itself."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    basic = header.partition(" ")[0].lower() == "basic"
    post = "client_secret" in form
    if basic and post:
        return "basic+post"
    return "basic" if basic else "post" if post else "none"


def _username_for_access_token(token):
    access = get_access_token_model().objects.filter(token_checksum=testsupport.checksum(token)).first()
    return access.user.username if access and access.user else None


def _username_for_refresh_token(token):
    refresh = get_refresh_token_model().objects.filter(token_checksum=testsupport.checksum(token)).first()
    return refresh.user.username if refresh and refresh.user else None


def _username_for_token_request(form):
    grant_type = form.get("grant_type")
    if grant_type == "password":
        return form.get("username") or None
    if grant_type == "refresh_token" and form.get("refresh_token"):
        return _username_for_refresh_token(form["refresh_token"])
    if grant_type == "authorization_code" and form.get("code"):
        grant = get_grant_model().objects.filter(code=form["code"]).first()
        return grant.user.username if grant and grant.user else None
    if grant_type == "urn:ietf:params:oauth:grant-type:device_code" and form.get("device_code"):
        device = get_device_grant_model().objects.filter(device_code=form["device_code"]).first()
        return device.user.username if device and device.user else None
    return None


def _sleep_ms(milliseconds):
    if milliseconds:
        time.sleep(milliseconds / 1000)


class TestSupportMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = request.path
        if not path.startswith(LOGGED_PREFIXES):
            return self.get_response(request)

        entry = {
            "seq": testsupport.next_sequence(),
            "time": testsupport.now(),
            "method": request.method,
            "path": path,
        }
        # Read the raw body first: request.POST then parses the cached copy, and DOT can still read both.
        _ = request.body
        form = request.POST if request.method == "POST" else {}
        username = None
        if path.startswith("/api/"):
            entry["bearer_token"] = _bearer(request)
            username = _username_for_access_token(entry["bearer_token"]) if entry["bearer_token"] else None
        elif path == TOKEN_PATH:
            entry["grant_type"] = form.get("grant_type")
            entry["refresh_token"] = form.get("refresh_token")
            entry["client_id"] = form.get("client_id")
            entry["client_auth"] = _client_auth(request, form)
            entry["resource"] = form.getlist("resource") if form else []
            entry["audience"] = form.get("audience")
            username = _username_for_token_request(form)
        elif path == "/o/revoke_token/":
            entry["token"] = form.get("token")
            entry["token_type_hint"] = form.get("token_type_hint")
            entry["client_id"] = form.get("client_id")
            entry["client_auth"] = _client_auth(request, form)
            token = form.get("token")
            if token:
                username = _username_for_refresh_token(token) or _username_for_access_token(token)
        else:
            entry["client_id"] = form.get("client_id")
            entry["bearer_token"] = _bearer(request)
            entry["client_auth"] = _client_auth(request, form)
            if path == "/o/device-authorization/":
                entry["resource"] = form.getlist("resource") if form else []
                entry["audience"] = form.get("audience")
        entry["username"] = username

        if path.startswith("/api/"):
            _sleep_ms(testsupport.control_value("api_delay_ms", username))
        elif path == TOKEN_PATH:
            _sleep_ms(testsupport.control_value("token_delay_before_ms", username))

        forced = None
        if path == TOKEN_PATH:
            forced = testsupport.control_value("token_status", username)
        elif path == "/o/revoke_token/":
            forced = testsupport.control_value("revoke_status", username)
        if forced:
            # A failing server: nothing is processed (no token issued, rotated or revoked).
            response = JsonResponse({"error": "server_error"}, status=forced)
        else:
            response = self.get_response(request)

        dropped = False
        if path == TOKEN_PATH:
            _sleep_ms(testsupport.control_value("token_delay_ms", username))
            dropped = testsupport.take_drop(username)
            if dropped:
                request.META[DROP_KEY] = True

        entry["status"] = response.status_code
        entry["dropped"] = dropped
        entry["finished"] = testsupport.now()
        testsupport.append_log(entry)
        return response
