"""Checks, against a running server, every fact Tests/AuthorizationServer/README.md states about it.

    scripts/auth-server start /tmp/auth >/dev/null
    .venv/bin/python Tests/AuthorizationServer/verify_facts.py /tmp/auth   # restarts the server as it goes
    scripts/auth-server stop /tmp/auth

Standard library only. Prints one line per fact and exits non-zero on the first one that does not hold.
Run it again when a pinned version in requirements.txt changes, and update the README with what changed.
"""

import base64
import email.utils
import hashlib
import http.client
import json
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

CONTROL = Path(__file__).resolve().parents[2] / "scripts" / "auth-server"
STATE = sys.argv[1]
BASE = ""


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def request(method, path, form=None, body=None, headers=None):
    """(status, headers, parsed JSON or raw text)."""
    data = None
    headers = dict(headers or {})
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with OPENER.open(req, timeout=30) as response:
            status, response_headers, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, response_headers, raw = error.code, error.headers, error.read()
    text = raw.decode()
    try:
        return status, response_headers, json.loads(text)
    except ValueError:
        return status, response_headers, text


def token(form):
    return request("POST", "/o/token/", form=form)


def password_grant(username="alice"):
    status, _, body = token(
        {"grant_type": "password", "client_id": "password-client", "username": username, "password": username + "-password"}
    )
    assert status == 200, (status, body)
    return body


def refresh(refresh_token, client_id="password-client"):
    return token({"grant_type": "refresh_token", "client_id": client_id, "refresh_token": refresh_token})


def me(access_token):
    return request("GET", "/api/me", headers={"Authorization": "Bearer " + access_token})


def control(**values):
    status, _, body = request("POST", "/test/control", body=values)
    assert status == 200, body


def new_user():
    status, _, body = request("POST", "/test/users", body={})
    assert status == 201, body
    return body["username"]


def restart(*settings):
    global BASE
    old = BASE
    BASE = subprocess.run([str(CONTROL), "restart", STATE, *settings], check=True, capture_output=True, text=True).stdout.strip()
    assert BASE == old, f"restart moved the server from {old} to {BASE}"


def fact(text):
    print("ok  ", text)


# --- OpenID Connect helpers (standard library only: RS256 is checked with pow, per RFC 8017 §8.2.2)

def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rs256_valid(jwk, signing_input, signature):
    """RSASSA-PKCS1-v1_5 with SHA-256: the signature, raised to e mod n, is the padded DigestInfo."""
    n = int.from_bytes(b64url_decode(jwk["n"]), "big")
    e = int.from_bytes(b64url_decode(jwk["e"]), "big")
    size = (n.bit_length() + 7) // 8
    if len(signature) != size:
        return False
    encoded = pow(int.from_bytes(signature, "big"), e, n).to_bytes(size, "big")
    digest_info = bytes.fromhex("3031300d060960864801650304020105000420") + hashlib.sha256(signing_input).digest()
    return encoded == b"\x00\x01" + b"\xff" * (size - 3 - len(digest_info)) + b"\x00" + digest_info


def id_token_parts(id_token, jwks):
    """(header, claims) of an ID token whose RS256 signature verifies with the JWKS key its kid names."""
    header_b64, payload_b64, signature_b64 = id_token.split(".")
    header, claims = json.loads(b64url_decode(header_b64)), json.loads(b64url_decode(payload_b64))
    keys = [key for key in jwks["keys"] if key["kid"] == header.get("kid")]
    assert header["alg"] == "RS256" and len(keys) == 1, (header, jwks)
    assert rs256_valid(keys[0], f"{header_b64}.{payload_b64}".encode(), b64url_decode(signature_b64)), header
    return header, claims


def at_hash(access_token):
    return b64url(hashlib.sha256(access_token.encode("ascii")).digest()[:16])


def sign_in(username, client_id="oidc-client", scope="openid profile email", nonce=None, cookie=None):
    """Authorization code + PKCE (+ nonce) through /test/login's cookie: (token response, cookie)."""
    verifier = secrets.token_urlsafe(48)
    challenge = b64url(hashlib.sha256(verifier.encode()).digest())
    if cookie is None:
        cookie = request("POST", "/test/login", body={"username": username})[2]["cookie"]
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": "http://127.0.0.1/callback",
             "code_challenge": challenge, "code_challenge_method": "S256", "state": "s", "scope": scope}
    if nonce is not None:
        query["nonce"] = nonce
    status, headers, _ = request("GET", "/o/authorize/?" + urllib.parse.urlencode(query), headers={"Cookie": cookie})
    assert status == 302, (status, headers)
    params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(headers["Location"]).query))
    status, headers, body = token({"grant_type": "authorization_code", "client_id": client_id, "code": params["code"],
                                   "redirect_uri": "http://127.0.0.1/callback", "code_verifier": verifier})
    return status, headers, body, cookie


def main():
    global BASE
    BASE = Path(STATE, "url").read_text().strip()
    restart()

    # --- the token endpoint and the protected resource
    status, headers, body = token(
        {"grant_type": "password", "client_id": "password-client", "username": "alice", "password": "alice-password"}
    )
    assert status == 200 and headers["Cache-Control"] == "no-store" and headers["Pragma"] == "no-cache", headers
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3600 and body["scope"] == "read write", body
    fact("token endpoint: 200, Cache-Control: no-store, Pragma: no-cache; expires_in 3600, scope 'read write'")
    error_status, error_headers, error_body = refresh("unknown")
    assert error_status == 400 and error_body["error"] == "invalid_grant", error_body
    assert error_headers["Cache-Control"] == "no-store", error_headers
    fact("token endpoint errors: 400 with JSON {error}, also Cache-Control: no-store")
    assert headers["Connection"] == "close" and "Content-Length" not in headers, headers
    fact("every response closes its connection (Connection: close, no Content-Length)")

    status, headers, payload = me(body["access_token"])
    assert status == 200 and payload == {"username": "alice"} and headers["Cache-Control"] == "max-age=60", headers
    fact("/api/me: 200 {'username': 'alice'}, Cache-Control: max-age=60, no Vary")
    assert "Vary" not in headers

    status, headers, _ = me("not-a-token")
    challenge = headers["WWW-Authenticate"]
    assert status == 401 and challenge.startswith('Bearer error="invalid_token"'), (status, challenge)
    fact(f"/api/me with an unknown token: 401, WWW-Authenticate: {challenge}")
    status, headers, _ = request("GET", "/api/me")
    assert status == 401 and "error=" not in headers["WWW-Authenticate"], headers
    fact(f"/api/me without a token: 401, WWW-Authenticate: {headers['WWW-Authenticate']} (no error, RFC 6750 §3.1)")

    tokens = password_grant()
    status, _, _ = request("POST", "/test/tokens/expire", body={"access_token": tokens["access_token"]})
    assert status == 200
    status, headers, _ = me(tokens["access_token"])
    assert status == 401 and headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"'), headers
    fact("an expired access token: 401 with error=\"invalid_token\" (POST /test/tokens/expire)")
    status, _, rotated = refresh(tokens["refresh_token"])
    assert status == 200, rotated
    fact("an expired access token's refresh token still refreshes")

    # --- rotation
    tokens = password_grant()
    status, _, rotated = refresh(tokens["refresh_token"])
    assert status == 200 and rotated["refresh_token"] != tokens["refresh_token"], rotated
    assert rotated["access_token"] != tokens["access_token"]
    assert me(tokens["access_token"])[0] == 401 and me(rotated["access_token"])[0] == 200
    fact("rotation: a refresh returns a new access and a new refresh token; the old access token is 401 at once")

    # A request in flight with the old access token (held 700 ms by api_delay_ms before the token is
    # checked) while the refresh happens.
    user = new_user()
    tokens = password_grant(user)
    control(username=user, api_delay_ms=700)
    result = {}
    in_flight = threading.Thread(target=lambda: result.update(status=me(tokens["access_token"])[0]))
    in_flight.start()
    time.sleep(0.2)
    status, _, rotated = refresh(tokens["refresh_token"])
    in_flight.join()
    assert status == 200 and result["status"] == 401, (status, result)
    control(username=user, api_delay_ms=0)
    fact("a request in flight with the old access token when the rotation commits gets 401")

    status, _, body = refresh(tokens["refresh_token"])
    assert status == 400 and body["error"] == "invalid_grant", body
    assert refresh(rotated["refresh_token"])[0] == 200
    fact("replaying a rotated refresh token: 400 invalid_grant; without reuse protection its successor still works")

    # --- reuse protection
    restart("REFRESH_TOKEN_REUSE_PROTECTION=true")
    tokens = password_grant()
    _, _, second = refresh(tokens["refresh_token"])
    _, _, third = refresh(second["refresh_token"])
    status, _, body = refresh(tokens["refresh_token"])
    assert status == 400 and body["error"] == "invalid_grant", body
    status, _, body = refresh(third["refresh_token"])
    assert status == 400 and body["error"] == "invalid_grant", body
    assert me(third["access_token"])[0] == 401
    fact("with REFRESH_TOKEN_REUSE_PROTECTION: a replay is invalid_grant and revokes the family (latest refresh "
         "token invalid_grant, latest access token 401)")

    # --- grace period
    restart("REFRESH_TOKEN_GRACE_PERIOD_SECONDS=30")
    tokens = password_grant()
    _, _, first = refresh(tokens["refresh_token"])
    status, _, again = refresh(tokens["refresh_token"])
    assert status == 200 and again["access_token"] == first["access_token"], (status, again)
    assert again["refresh_token"] == first["refresh_token"]
    fact("with a grace period: replaying the previous refresh token within it returns the same new pair")

    # --- no rotation
    restart("ROTATE_REFRESH_TOKEN=false")
    tokens = password_grant()
    status, _, second = refresh(tokens["refresh_token"])
    assert status == 200 and second["refresh_token"] == tokens["refresh_token"], second
    assert me(tokens["access_token"])[0] == 401 and me(second["access_token"])[0] == 200
    assert refresh(tokens["refresh_token"])[0] == 200
    fact("with ROTATE_REFRESH_TOKEN=false: the refresh token stays the same and reusable; the old access token is 401")

    # --- lifetime
    restart("ACCESS_TOKEN_EXPIRE_SECONDS=2")
    tokens = password_grant()
    assert tokens["expires_in"] == 2 and me(tokens["access_token"])[0] == 200
    time.sleep(2.2)
    status, headers, _ = me(tokens["access_token"])
    assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"], headers
    assert refresh(tokens["refresh_token"])[0] == 200
    fact("ACCESS_TOKEN_EXPIRE_SECONDS=2: expires_in 2, then 401 invalid_token; the refresh token still works")
    restart()

    # --- revocation (RFC 7009)
    status, headers, body = request("POST", "/o/revoke_token/", form={"token": "unknown", "client_id": "password-client"})
    assert status == 200 and body == "", (status, body)
    fact("revoking an unknown token: 200, empty body")
    tokens = password_grant()
    status, _, _ = request(
        "POST", "/o/revoke_token/",
        form={"token": tokens["refresh_token"], "token_type_hint": "refresh_token", "client_id": "password-client"},
    )
    assert status == 200 and me(tokens["access_token"])[0] == 401
    status, _, body = refresh(tokens["refresh_token"])
    assert status == 400 and body["error"] == "invalid_grant"
    fact("revoking a refresh token: 200; its access token is 401 at once and the refresh token is invalid_grant")
    tokens = password_grant()
    request("POST", "/o/revoke_token/", form={"token": tokens["access_token"], "client_id": "password-client"})
    assert me(tokens["access_token"])[0] == 401
    status, _, body = refresh(tokens["refresh_token"])
    assert status == 400 and body["error"] == "invalid_grant", body
    fact("revoking the access token also makes its refresh token invalid_grant (DOT drops the pair)")
    tokens = password_grant()
    status, _, body = request(
        "POST", "/o/revoke_token/", form={"token": tokens["refresh_token"], "client_id": "pkce-client"}
    )
    assert status == 200 and refresh(tokens["refresh_token"])[0] == 200, (status, body)
    fact("revoking with another client's id: 200, and nothing is revoked")

    # --- device authorization grant (RFC 8628)
    status, headers, device = request("POST", "/o/device-authorization/", form={"client_id": "device-client"})
    assert status == 200 and {"device_code", "user_code", "verification_uri", "expires_in", "interval"} <= device.keys()
    assert device["interval"] == 1 and device["verification_uri"] == BASE + "/o/device/", device
    fact(f"device authorization: 200 {{device_code, user_code, verification_uri, expires_in={device['expires_in']}, interval=1}}")
    poll = {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "client_id": "device-client",
            "device_code": device["device_code"]}
    errors = {token(poll)[2]["error"] for _ in range(10)}
    assert errors == {"authorization_pending"}, errors
    fact("polling 10 times back to back, faster than the interval: always authorization_pending, never slow_down")
    status, _, body = request("POST", "/test/device/approve", body={"user_code": device["user_code"], "username": "alice"})
    assert status == 200, body
    status, _, tokens = token(poll)
    assert status == 200 and me(tokens["access_token"])[2] == {"username": "alice"} and "refresh_token" in tokens
    fact("after POST /test/device/approve the next poll returns tokens for alice (with a refresh token)")
    status, _, again = token(poll)
    assert status == 200 and again["access_token"] != tokens["access_token"], again
    assert me(tokens["access_token"])[0] == 200
    fact("polling again with an already redeemed device code: 200 and a second, independent token pair "
         "(DOT does not make device codes single-use)")
    assert refresh(tokens["refresh_token"], client_id="device-client")[0] == 200
    fact("the device client's refresh token refreshes")
    _, _, device = request("POST", "/o/device-authorization/", form={"client_id": "device-client"})
    request("POST", "/test/device/approve", body={"user_code": device["user_code"], "username": "alice", "action": "deny"})
    status, _, body = token({**poll, "device_code": device["device_code"]})
    assert status == 400 and body["error"] == "access_denied", body
    fact("a denied device authorization: 400 access_denied")

    # --- authorization code + PKCE
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    status, _, login = request("POST", "/test/login", body={"username": "alice"})
    assert status == 200 and login["cookie"].startswith("sessionid="), login
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": "pkce-client", "redirect_uri": "http://127.0.0.1/callback",
        "code_challenge": challenge, "code_challenge_method": "S256", "state": "xyz", "scope": "read write",
    })
    status, headers, _ = request("GET", "/o/authorize/?" + query, headers={"Cookie": login["cookie"]})
    location = urllib.parse.urlsplit(headers["Location"])
    params = dict(urllib.parse.parse_qsl(location.query))
    assert status == 302 and location.netloc == "127.0.0.1" and location.path == "/callback", headers
    assert params["state"] == "xyz" and params["code"], params
    fact("PKCE: POST /test/login, then GET /o/authorize/ with the cookie: 302 to the callback with code and state")
    exchange = {"grant_type": "authorization_code", "client_id": "pkce-client", "code": params["code"],
                "redirect_uri": "http://127.0.0.1/callback", "code_verifier": "wrong" + verifier}
    status, _, body = token(exchange)
    assert status == 400 and body["error"] == "invalid_grant", body
    fact("a wrong code_verifier: 400 invalid_grant")
    status, _, tokens = token({**exchange, "code_verifier": verifier})
    assert status == 200 and me(tokens["access_token"])[2] == {"username": "alice"}, tokens
    fact("the right code_verifier: tokens for alice")
    status, _, body = token({**exchange, "code_verifier": verifier})
    assert status == 400 and body["error"] == "invalid_grant", body
    fact("the code again: 400 invalid_grant")
    no_pkce = urllib.parse.urlencode({"response_type": "code", "client_id": "pkce-client",
                                      "redirect_uri": "http://127.0.0.1/callback", "state": "s"})
    status, headers, _ = request("GET", "/o/authorize/?" + no_pkce, headers={"Cookie": login["cookie"]})
    assert status == 302 and "error=invalid_request" in headers["Location"], headers
    fact("no code_challenge: 302 to the callback with error=invalid_request (PKCE is required)")
    status, headers, _ = request("GET", "/o/authorize/?" + query)
    assert status == 302 and "/test/login-required" in headers["Location"], headers
    fact("no session cookie: 302 to the login page (LOGIN_URL /test/login-required)")

    oidc_facts()

    # --- fault injection
    user = new_user()
    tokens = password_grant(user)
    control(username=user, drop_next_token_response=True)
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(BASE).netloc, timeout=30)
    connection.request("POST", "/o/token/", urllib.parse.urlencode(
        {"grant_type": "refresh_token", "client_id": "password-client", "refresh_token": tokens["refresh_token"]}),
        {"Content-Type": "application/x-www-form-urlencoded"})
    try:
        connection.getresponse()
        raise AssertionError("the dropped response arrived")
    except http.client.RemoteDisconnected:
        pass
    _, _, entries = request("GET", "/test/log?username=" + user + "&path=/o/token/")
    assert entries[-1]["status"] == 200 and entries[-1]["dropped"] is True, entries[-1]
    assert refresh(tokens["refresh_token"])[2]["error"] == "invalid_grant" and me(tokens["access_token"])[0] == 401
    fact("drop_next_token_response: the server rotates (log: status 200, dropped), the client sees the connection "
         "close with no response; the presented refresh token is then invalid_grant")

    control(username=user, token_delay_ms=500)
    tokens = password_grant(user)
    started = time.monotonic()
    status, _, rotated = refresh(tokens["refresh_token"])
    assert status == 200 and time.monotonic() - started >= 0.5
    control(username=user, token_delay_ms=0)
    fact("token_delay_ms holds the answer after the rotation committed")

    _, _, entries = request("GET", "/test/log?username=" + user)
    assert all(entry["username"] == user for entry in entries)
    assert any(entry["path"] == "/o/token/" and entry["refresh_token"] == tokens["refresh_token"] for entry in entries)
    fact("/test/log?username= filters by the user a request acted for")

    # --- introspection
    basic = base64.b64encode(b"introspection-client:introspection-secret").decode()
    status, _, body = request("POST", "/o/introspect/", form={"token": rotated["access_token"]},
                              headers={"Authorization": "Basic " + basic})
    assert status == 200 and body["active"] is True and body["username"] == user, body
    status, _, body = request("POST", "/o/introspect/", form={"token": tokens["access_token"]},
                              headers={"Authorization": "Basic " + basic})
    assert status == 200 and body == {"active": False}, body
    fact("introspection with introspection-client: active true for a live token, {active: false} for a rotated one")

    # --- restart keeps the port and the database
    tokens = password_grant()
    jwks = request("GET", "/o/.well-known/jwks.json")[2]
    restart()
    assert me(tokens["access_token"])[0] == 200
    assert request("GET", "/o/.well-known/jwks.json")[2] == jwks
    fact("restart: same URL, tokens issued before it still work, the same ID-token signing key (JWKS unchanged)")

    print("all facts hold")


def oidc_facts():
    # --- discovery and keys
    status, _, discovery = request("GET", "/o/.well-known/openid-configuration")
    issuer = BASE + "/o"
    assert status == 200 and discovery["issuer"] == issuer, discovery
    expected = {"authorization_endpoint": "/o/authorize/", "token_endpoint": "/o/token/",
                "userinfo_endpoint": "/o/userinfo/", "jwks_uri": "/o/.well-known/jwks.json",
                "end_session_endpoint": "/o/logout/"}
    for key, path in expected.items():
        assert discovery[key] == BASE + path, (key, discovery[key])
    assert discovery["id_token_signing_alg_values_supported"] == ["RS256", "HS256"], discovery
    assert {"openid", "profile", "email"} <= set(discovery["scopes_supported"]), discovery
    fact(f"discovery: issuer {issuer} (the base URL + /o), endpoints /o/authorize/, /o/token/, /o/userinfo/, "
         "/o/.well-known/jwks.json, end_session_endpoint /o/logout/; id_token_signing_alg_values_supported "
         "[RS256, HS256]")
    status, headers, jwks = request("GET", "/o/.well-known/jwks.json")
    assert status == 200 and len(jwks["keys"]) == 1, jwks
    key = jwks["keys"][0]
    assert key["kty"] == "RSA" and key["alg"] == "RS256" and key["use"] == "sig" and key["kid"], key
    assert len(b64url_decode(key["n"])) == 256, "not a 2048-bit key"
    thumbprint = json.dumps({"e": key["e"], "kty": "RSA", "n": key["n"]}, separators=(",", ":"))
    assert key["kid"] == b64url(hashlib.sha256(thumbprint.encode()).digest()), key
    assert headers["Cache-Control"].startswith("public, max-age=3600"), headers
    fact(f"JWKS: one RSA-2048 key, alg RS256, use sig, kid = its RFC 7638 thumbprint; Cache-Control: {headers['Cache-Control']}")

    # --- sign-in with nonce
    nonce = secrets.token_urlsafe(16)
    before = int(time.time())
    status, headers, tokens, cookie = sign_in("alice", nonce=nonce)
    assert status == 200 and "id_token" in tokens and tokens["scope"] == "openid profile email", tokens
    header, claims = id_token_parts(tokens["id_token"], jwks)
    assert header == {"typ": "JWT", "alg": "RS256", "kid": key["kid"]}, header
    assert claims["iss"] == discovery["issuer"] and claims["aud"] == "oidc-client", claims
    assert claims["nonce"] == nonce and claims["at_hash"] == at_hash(tokens["access_token"]), claims
    assert claims["sub"] == "1" and claims["preferred_username"] == "alice", claims
    assert before - 1 <= claims["iat"] <= time.time() + 1 and claims["exp"] == claims["iat"] + 36000, claims
    assert claims["auth_time"] <= claims["iat"] and "nbf" not in claims and "azp" not in claims, claims
    assert claims["email"] == "alice@example.com" and claims["name"] == "Alice Liddell", claims
    fact("oidc-client sign-in (code + PKCE + nonce): the ID token is RS256 with header {typ: JWT, alg: RS256, kid} "
         "(the JWKS key's kid; the signature verifies); iss = discovery's issuer, aud 'oidc-client', nonce echoed, "
         "at_hash = left half of SHA-256 of the access token; sub is the user's primary key ('1' for alice), not "
         "the username; exp = iat + 36000 (DOT's ID_TOKEN_EXPIRE_SECONDS); auth_time, jti; no nbf, no azp")
    fact(f"ID token claims: {', '.join(claims)}")
    sent = email.utils.parsedate_to_datetime(headers["Date"]).timestamp()
    assert abs(sent - time.time()) < 5, headers["Date"]
    fact(f"the token endpoint sends Date (RFC 9110 IMF-fixdate, whole seconds), e.g. '{headers['Date']}'")
    assert me(tokens["access_token"])[2] == {"username": "alice"}
    fact("/api/me needs no scope: an 'openid profile email' access token works there")
    status, _, userinfo = request("GET", "/o/userinfo/", headers={"Authorization": "Bearer " + tokens["access_token"]})
    assert status == 200 and userinfo == {key: claims[key] for key in userinfo} and userinfo["sub"] == "1", userinfo
    assert set(userinfo) == {"sub", "preferred_username", "name", "given_name", "family_name", "email",
                             "email_verified"}, userinfo
    fact(f"/o/userinfo/ with the access token: 200 JSON {sorted(userinfo)}, the same values as the ID token")
    status, _, refreshed = refresh(tokens["refresh_token"], client_id="oidc-client")
    assert status == 200 and "id_token" in refreshed, refreshed
    _, new_claims = id_token_parts(refreshed["id_token"], jwks)
    assert new_claims["sub"] == claims["sub"] and new_claims["auth_time"] == claims["auth_time"], new_claims
    assert new_claims["iss"] == issuer and new_claims["at_hash"] == at_hash(refreshed["access_token"]), new_claims
    assert "nonce" not in new_claims and new_claims["jti"] != claims["jti"], new_claims
    fact("a refresh returns a new ID token: same sub and auth_time, at_hash of the new access token, no nonce")
    status, _, tokens, _ = sign_in("bob", scope="openid", nonce="n")
    _, claims = id_token_parts(tokens["id_token"], jwks)
    assert set(claims) == {"aud", "iat", "nonce", "at_hash", "sub", "iss", "exp", "auth_time", "jti"}, claims
    fact("scope 'openid' alone: no profile or email claims in the ID token")
    status, _, tokens, _ = sign_in("bob", scope="openid")
    assert "nonce" not in id_token_parts(tokens["id_token"], jwks)[1]
    fact("no nonce in the authorization request: no nonce claim")
    status, _, tokens, _ = sign_in("bob", scope="read write")
    assert status == 200 and "id_token" not in tokens, tokens
    fact("oidc-client without 'openid' in the scope: plain OAuth tokens, no id_token")
    status, _, body, _ = sign_in("bob", client_id="pkce-client", scope="openid read")
    assert status == 500, (status, body)
    fact("a client without an algorithm (pkce-client and the other non-OIDC clients) asking for 'openid': the "
         "token endpoint answers 500 (DOT: 'This application does not support signed tokens')")
    status, _, discovery_localhost = request("GET", "/o/.well-known/openid-configuration",
                                             headers={"Host": urllib.parse.urlsplit(BASE).netloc.replace("127.0.0.1", "localhost")})
    assert discovery_localhost["issuer"] == issuer.replace("127.0.0.1", "localhost"), discovery_localhost
    fact("the issuer follows the request's Host header (localhost:PORT gives http://localhost:PORT/o): use 127.0.0.1")

    # --- device grant
    status, _, device = request("POST", "/o/device-authorization/", form={"client_id": "oidc-device-client", "scope": "openid profile"})
    assert status == 200, device
    request("POST", "/test/device/approve", body={"user_code": device["user_code"], "username": "alice"})
    status, _, tokens = token({"grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                               "client_id": "oidc-device-client", "device_code": device["device_code"]})
    assert status == 200 and tokens["scope"] == "openid profile" and "id_token" not in tokens, tokens
    fact("oidc-device-client, scope 'openid profile': the device poll returns tokens with scope 'openid profile' "
         "but NO id_token (oauthlib 3.3.1's device grant has no OpenID Connect variant)")
    status, _, refreshed = refresh(tokens["refresh_token"], client_id="oidc-device-client")
    assert status == 200 and "id_token" in refreshed, refreshed
    _, claims = id_token_parts(refreshed["id_token"], jwks)
    assert claims["aud"] == "oidc-device-client" and claims["sub"] == "1" and claims["iss"] == issuer, claims
    fact("... a refresh of those tokens does return an ID token (aud 'oidc-device-client', sub '1')")

    # --- RP-initiated logout. It deletes every token of the user, so it runs on users of its own.
    user = new_user()
    status, _, tokens, cookie = sign_in(user, scope="openid read", nonce="n")
    password_tokens = password_grant(user)
    _, _, device = request("POST", "/o/device-authorization/", form={"client_id": "oidc-device-client", "scope": "openid"})
    request("POST", "/test/device/approve", body={"user_code": device["user_code"], "username": user})
    _, _, device_tokens = token({"grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                                 "client_id": "oidc-device-client", "device_code": device["device_code"]})
    bystander = password_grant("bob")
    logout = {"id_token_hint": tokens["id_token"], "client_id": "oidc-client",
              "post_logout_redirect_uri": "http://127.0.0.1/signed-out", "state": "bye"}
    status, headers, _ = request("GET", "/o/logout/?" + urllib.parse.urlencode(logout), headers={"Cookie": cookie})
    assert status == 302 and headers["Location"] == "http://127.0.0.1/signed-out?state=bye", (status, headers)
    assert headers["Set-Cookie"].startswith('sessionid="";'), headers
    fact("GET /o/logout/ with id_token_hint, client_id, post_logout_redirect_uri, state and the session cookie: "
         "302 to http://127.0.0.1/signed-out?state=bye at once (no prompt); the session cookie is cleared")
    assert me(tokens["access_token"])[0] == 401
    status, _, body = refresh(tokens["refresh_token"], client_id="oidc-client")
    assert status == 400 and body["error"] == "invalid_grant", body
    fact("after logout the access token is 401 and the refresh token 400 invalid_grant (access tokens and ID "
         "tokens deleted, refresh tokens marked revoked)")
    assert me(password_tokens["access_token"])[0] == 401 and refresh(password_tokens["refresh_token"])[0] == 400
    assert me(device_tokens["access_token"])[0] == 200
    assert refresh(device_tokens["refresh_token"], client_id="oidc-device-client")[0] == 200
    assert me(bystander["access_token"])[0] == 200
    fact("logout ends the user's tokens of every client whose grant is authorization code, implicit, password or "
         "client credentials (password-client too), but not device-code clients' tokens (oidc-device-client's "
         "stay valid) nor other users' tokens")
    status, headers, _ = request("GET", "/o/authorize/?" + urllib.parse.urlencode(
        {"response_type": "code", "client_id": "oidc-client", "redirect_uri": "http://127.0.0.1/callback",
         "code_challenge": "x" * 43, "code_challenge_method": "S256", "scope": "openid"}), headers={"Cookie": cookie})
    assert status == 302 and headers["Location"].startswith("/test/login-required"), headers
    fact("after logout the old session cookie is logged out (authorize redirects to the login page)")
    status, headers, page = request("GET", "/o/logout/?" + urllib.parse.urlencode(logout))
    assert status == 400 and "The ID Token is expired, revoked, malformed, or otherwise invalid." in page, status
    fact("the same logout request again: 400 HTML page 'invalid_request … The ID Token is expired, revoked, "
         "malformed, or otherwise invalid.' (the ID token was deleted), no redirect")

    user = new_user()
    _, _, tokens, _ = sign_in(user, scope="openid", nonce="n")
    wrong = {**logout, "id_token_hint": tokens["id_token"], "post_logout_redirect_uri": "http://127.0.0.1/elsewhere"}
    status, _, page = request("GET", "/o/logout/?" + urllib.parse.urlencode(wrong))
    assert status == 400 and "This client does not have this redirect uri registered." in page, status
    assert me(tokens["access_token"])[0] == 200
    fact("an unregistered post_logout_redirect_uri: 400 HTML page, nothing ended")
    other_session = request("POST", "/test/login", body={"username": "bob"})[2]["cookie"]
    status, _, page = request("GET", "/o/logout/?" + urllib.parse.urlencode({**logout, "id_token_hint": tokens["id_token"]}),
                              headers={"Cookie": other_session})
    assert status == 200 and "Confirm Logout" in page and me(tokens["access_token"])[0] == 200, status
    fact("a hint for another user than the session's: 200 confirmation form, nothing ended yet")
    status, headers, _ = request("GET", "/o/logout/?" + urllib.parse.urlencode({**logout, "id_token_hint": tokens["id_token"]}))
    assert status == 302 and headers["Location"] == "http://127.0.0.1/signed-out?state=bye", headers
    assert me(tokens["access_token"])[0] == 401 and refresh(tokens["refresh_token"], client_id="oidc-client")[0] == 400
    fact("without a session cookie the hint alone suffices: 302 to the post-logout URI and the hint's user's "
         "tokens are ended")


if __name__ == "__main__":
    main()
