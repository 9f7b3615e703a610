"""The protected resource and the test-support endpoints (test project only)."""

import functools
import json
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model, login
from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from oauth2_provider.models import get_access_token_model, get_device_grant_model, get_refresh_token_model
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import ProtectedResourceMetadataView

from . import testsupport


class MeView(ProtectedResourceMetadataView):
    """`/api/me`: who the bearer token belongs to, cacheable for a minute.

    The metadata variant of DOT's protected view answers a missing, unknown, expired or revoked token
    with 401 and `WWW-Authenticate: Bearer error="invalid_token",…` (RFC 6750 §3.1); the stock view
    answers a bare 403.
    """

    def get(self, request, *args, **kwargs):
        response = JsonResponse({"username": request.resource_owner.username})
        response["Cache-Control"] = "max-age=60"
        return response


def _json_body(request):
    if not request.body:
        return {}
    body = json.loads(request.body)
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    return body


def _bad_request(message):
    return JsonResponse({"error": message}, status=400)


def _user(username):
    return get_user_model().objects.filter(username=username).first()


def _no_such_user():
    return JsonResponse({"error": "no such user"}, status=404)


def _json_post(view):
    """POST only; the view gets the body, a JSON object (or {} when empty). Anything else is a 400."""

    @require_POST
    @functools.wraps(view)
    def wrapper(request):
        try:
            body = _json_body(request)
        except ValueError as error:
            return _bad_request(str(error))
        return view(request, body)

    return wrapper


@require_GET
def health(request):
    return JsonResponse({"ok": True, "settings": effective_settings()})


def effective_settings():
    keys = (
        "ACCESS_TOKEN_EXPIRE_SECONDS",
        "REFRESH_TOKEN_EXPIRE_SECONDS",
        "ROTATE_REFRESH_TOKEN",
        "REFRESH_TOKEN_GRACE_PERIOD_SECONDS",
        "REFRESH_TOKEN_REUSE_PROTECTION",
        "DEVICE_FLOW_INTERVAL",
    )
    return {key: getattr(oauth2_settings, key) for key in keys}


@require_GET
def log(request):
    entries = testsupport.read_log(username=request.GET.get("username"), path_prefix=request.GET.get("path"))
    return JsonResponse(entries, safe=False)


@require_POST
def clear_log(request):
    testsupport.clear_log(username=request.GET.get("username"))
    return JsonResponse({"ok": True})


def control(request):
    if request.method == "GET":
        return JsonResponse(testsupport.controls_snapshot())
    if request.method != "POST":
        return JsonResponse({"error": "GET or POST"}, status=405)
    try:
        body = _json_body(request)
        if body.pop("reset", False):
            testsupport.reset_controls()
        username = body.pop("username", None)
        testsupport.set_controls(body, username=username)
    except ValueError as error:
        return _bad_request(str(error))
    return JsonResponse(testsupport.controls_snapshot())


@_json_post
def create_user(request, body):
    username = body.get("username") or "user-" + secrets.token_hex(6)
    password = body.get("password") or username + "-password"
    if _user(username):
        return JsonResponse({"error": f"user {username} exists"}, status=409)
    get_user_model().objects.create_user(username=username, password=password)
    return JsonResponse({"username": username, "password": password}, status=201)


@_json_post
def login_session(request, body):
    """Logs a user in and returns the session cookie, for driving /o/authorize/ without a browser."""
    user = _user(body.get("username", ""))
    if not user:
        return _no_such_user()
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    request.session.save()
    return JsonResponse({"cookie": f"sessionid={request.session.session_key}"})


@_json_post
def approve_device(request, body):
    action = body.get("action", "accept")
    if action not in ("accept", "deny"):
        return _bad_request("action must be accept or deny")
    user = _user(body.get("username", ""))
    if not user:
        return _no_such_user()
    model = get_device_grant_model()
    grant = model.objects.filter(user_code=body.get("user_code", ""), status=model.AUTHORIZATION_PENDING).first()
    if not grant:
        return JsonResponse({"error": "no pending device authorization with that user code"}, status=404)
    if grant.is_expired():
        return JsonResponse({"error": "the device authorization expired"}, status=410)
    grant.user = user
    grant.status = model.AUTHORIZED if action == "accept" else model.DENIED
    grant.save(update_fields=["user", "status"])
    return JsonResponse({"status": grant.status})


@_json_post
def expire_access_token(request, body):
    """Makes an access token expired now, so a test needs no short lifetime and no waiting."""
    token = body.get("access_token", "")
    updated = (
        get_access_token_model()
        .objects.filter(token_checksum=testsupport.checksum(token))
        .update(expires=timezone.now() - timedelta(seconds=1))
    )
    if not updated:
        return JsonResponse({"error": "no such access token"}, status=404)
    return JsonResponse({"ok": True})


@_json_post
def revoke_user(request, body):
    """Revokes every token a user holds, as an administrator ending the user's sessions would."""
    user = _user(body.get("username", ""))
    if not user:
        return _no_such_user()
    refresh_tokens = list(get_refresh_token_model().objects.filter(user=user, revoked__isnull=True))
    for refresh_token in refresh_tokens:
        refresh_token.revoke()
    deleted, _ = get_access_token_model().objects.filter(user=user).delete()
    return JsonResponse({"revoked_refresh_tokens": len(refresh_tokens), "deleted_access_tokens": deleted})
