"""Self-test of the TEST ONLY DPoP server: `python selftest.py` (from the repository's .venv). Exit status 0 = passed.

Starts dpop_server.py as a subprocess on a free loopback port, makes DPoP proofs with jwcrypto (an EC P-256 key,
plus others where a check needs them) and checks what the server accepts, refuses, counts and logs.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from http.client import HTTPConnection
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from jwcrypto.common import base64url_encode, json_encode
from jwcrypto.jwk import JWK
from jwcrypto.jws import JWS

SERVER = Path(__file__).resolve().parent / "dpop_server.py"
FAILURES = []
EXPECTED = Counter()  # what /stats must say at the end: "proofs", "verified", and each refusal reason


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        FAILURES.append(what)


def start():
    process = subprocess.Popen([sys.executable, str(SERVER), "--port", "0"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    check(line.startswith("http://127.0.0.1:") and line.endswith("\n"), f"startup line {line.strip()!r}")
    return process, line.strip()


class Client:
    def __init__(self, base):
        self.base = base
        parts = urlsplit(base)
        self.host, self.port = parts.hostname, parts.port
        self.conn = HTTPConnection(self.host, self.port, timeout=10)

    def req(self, method, path, headers=(), form=None, body=None):
        if form is not None:
            body = urlencode(form).encode()
            headers = list(headers) + [("Content-Type", "application/x-www-form-urlencoded")]
        elif isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = list(headers) + [("Content-Type", "application/json")]
        self.conn.putrequest(method, path)
        for name, value in headers:
            self.conn.putheader(name, value)
        self.conn.putheader("Content-Length", str(len(body or b"")))
        self.conn.endheaders(body)
        response = self.conn.getresponse()
        raw = response.read()
        check(response.getheader("Date") is not None and response.getheader("Cache-Control") == "no-store",
              f"  {method} {path} -> {response.status} has Date and Cache-Control: no-store")
        try:
            data = json.loads(raw) if raw else None
        except ValueError:
            data = raw
        return response.status, response, data

    def control(self, **changes):
        status, _, _ = self.req("POST", "/control", body=changes)
        assert status == 200, status

    def last_log(self):
        return self.req("GET", "/log")[2][-1]


def ath(token):
    return base64url_encode(hashlib.sha256(token.encode("ascii")).digest())


def proof(key, htm, htu, *, token=None, nonce=None, iat=None, jti=None, typ="dpop+jwt", alg="ES256",
          jwk=None, claims=None):
    header = {"typ": typ, "alg": alg, "jwk": jwk if jwk is not None else key.export_public(as_dict=True)}
    body = {"jti": jti or str(uuid.uuid4()), "htm": htm, "htu": htu, "iat": int(time.time()) if iat is None else iat}
    if token is not None:
        body["ath"] = ath(token)
    if nonce is not None:
        body["nonce"] = nonce
    body.update(claims or {})
    jws = JWS(json_encode(body))
    jws.add_signature(key, alg, protected=json_encode(header))
    return jws.serialize(compact=True)


def unsigned_proof(key, htm, htu):
    header = {"typ": "dpop+jwt", "alg": "none", "jwk": key.export_public(as_dict=True)}
    body = {"jti": str(uuid.uuid4()), "htm": htm, "htu": htu, "iat": int(time.time())}
    return base64url_encode(json_encode(header)) + "." + base64url_encode(json_encode(body)) + "."


def main():
    process, base = start()
    try:
        run(Client(base), base)
    finally:
        process.stdin.close()  # the server exits when its stdin closes
        try:
            process.wait(10)
            check(process.returncode == 0, "server exited by itself once its stdin closed")
        except subprocess.TimeoutExpired:
            process.kill()
            check(False, "server exited by itself once its stdin closed")
    other, _ = start()
    other.send_signal(signal.SIGTERM)
    try:
        other.wait(10)
        check(True, "server exits on SIGTERM")
    except subprocess.TimeoutExpired:
        other.kill()
        check(False, "server exits on SIGTERM")
    other.stdin.close()
    print(f"\n{'FAILED: ' + str(len(FAILURES)) if FAILURES else 'PASSED'}")
    return 1 if FAILURES else 0


def run(c, base):
    key = JWK.generate(kty="EC", crv="P-256")
    other_key = JWK.generate(kty="EC", crv="P-256")
    jkt, other_jkt = key.thumbprint(), other_key.thumbprint()
    token_url, resource_url = base + "/token", base + "/resource"
    c.req("POST", "/reset")

    def refused(reason, expected_proof=True):
        if expected_proof:
            EXPECTED["proofs"] += 1
        EXPECTED[reason] += 1
        entry = c.last_log()
        check(entry["proof"] == reason, f"  log says {reason} (got {entry['proof']})")

    def verified():
        EXPECTED["proofs"] += 1
        EXPECTED["verified"] += 1
        check(c.last_log()["proof"] == "verified", "  log says verified")

    def password_grant(k, user="alice", alg="ES256"):
        status, _, data = c.req("POST", "/token", [("DPoP", proof(k, "POST", token_url, alg=alg))],
                                form={"grant_type": "password", "username": user, "password": "pw",
                                      "client_id": "app"})
        verified()
        return status, data

    # --- password grant -----------------------------------------------------------------------------------
    status, tokens = password_grant(key)
    check(status == 200 and tokens["token_type"] == "DPoP" and tokens["expires_in"] == 3600
          and tokens["scope"] == "read" and tokens["access_token"] and tokens["refresh_token"],
          "password grant with a proof: a DPoP token")
    check(c.last_log()["jkt"] == jkt and c.last_log()["grant_type"] == "password", "  log: the key's jkt, grant_type")
    access, refresh = tokens["access_token"], tokens["refresh_token"]

    status, _, data = c.req("POST", "/token", form={"grant_type": "password", "username": "a", "password": "p",
                                                    "client_id": "app"})
    refused("missing", expected_proof=False)
    check(status == 400 and data["error"] == "invalid_dpop_proof", "token request without a proof: invalid_dpop_proof")

    # --- resource -----------------------------------------------------------------------------------------
    def resource(k, htu=resource_url, method="GET", path="/resource", scheme="DPoP", tok=None, raw=None, **kw):
        tok = tok or access
        headers = [("Authorization", f"{scheme} {tok}")]
        value = raw if raw is not None else proof(k, method, htu, token=tok, **kw) if k is not None else None
        if value is not None:
            headers.append(("DPoP", value))
        return c.req(method, path, headers)

    status, _, data = resource(key)
    verified()
    check(status == 200 and data == {"user": "alice", "method": "GET", "path": "/resource"},
          "resource accepts a correct proof")
    status, _, data = resource(key, htu=base + "/resource/x/y", method="PATCH", path="/resource/x/y?q=1")
    verified()
    check(status == 200 and data["path"] == "/resource/x/y" and data["method"] == "PATCH",
          "resource under /resource/ with a query the proof's htu leaves out")

    def refusal(what, reason, response, error="invalid_dpop_proof", carried=True):
        status, headers, _ = response
        challenge = headers.getheader("WWW-Authenticate") or ""
        check(status == 401 and challenge.startswith(f'DPoP error="{error}"'), f"resource refuses {what}: {challenge}")
        if reason:
            refused(reason, expected_proof=carried)

    refusal("wrong htm", "htm", resource(key, method="GET", htu=resource_url, raw=proof(key, "POST", resource_url,
                                                                                        token=access)))
    refusal("wrong htu", "htu", resource(key, htu=base + "/resource/other"))
    refusal("wrong htu port", "htu", resource(key, htu="http://127.0.0.1:1/resource"))
    refusal("old iat", "iat", resource(key, iat=int(time.time()) - 300))
    refusal("future iat", "iat", resource(key, iat=int(time.time()) + 300))
    replayed = proof(key, "GET", resource_url, token=access)
    check(resource(None, raw=replayed)[0] == 200, "first use of a proof accepted")
    verified()
    refusal("replayed jti", "jti_replay", resource(None, raw=replayed))
    refusal("wrong ath", "ath", resource(None, raw=proof(key, "GET", resource_url, token=access + "x")))
    refusal("missing ath", "ath", resource(None, raw=proof(key, "GET", resource_url)))
    refusal("another key's proof", "jkt_mismatch", resource(other_key))
    check(c.last_log()["jkt"] == other_jkt, "  log names the other key's jkt")
    refusal("Bearer scheme for a bound token", None, resource(key, scheme="Bearer"), error="invalid_token")
    verified()  # the proof itself was fine; the scheme was not
    refusal("alg none", "alg", resource(None, raw=unsigned_proof(key, "GET", resource_url)))
    hmac_key = JWK.generate(kty="oct", size=256)
    refusal("alg HS256", "alg", resource(hmac_key, alg="HS256", jwk={"kty": "EC"}))
    refusal("a private jwk", "jwk", resource(key, jwk=key.export_private(as_dict=True)))
    refusal("no jwk", "jwk", resource(None, raw=proof(key, "GET", resource_url, token=access, jwk={})))
    refusal("a jwk of another type than alg", "jwk",
            resource(key, jwk=JWK.generate(kty="EC", crv="P-384").export_public(as_dict=True)))
    refusal("a signature by another key", "signature",
            resource(other_key, jwk=key.export_public(as_dict=True)))
    refusal("typ jwt", "typ", resource(key, typ="jwt"))
    refusal("not a JWS", "malformed", resource(None, raw="not-a-jws"))
    refusal("no proof", "missing", resource(None), carried=False)
    status, headers, _ = c.req("GET", "/resource", [("Authorization", f"DPoP {access}"),
                                                     ("DPoP", proof(key, "GET", resource_url, token=access)),
                                                     ("DPoP", proof(key, "GET", resource_url, token=access))])
    check(status == 401, "two DPoP headers refused")
    refused("malformed")
    status, headers, _ = c.req("GET", "/resource", [("Authorization", "DPoP unknown-token"),
                                                     ("DPoP", proof(key, "GET", resource_url, token="unknown-token"))])
    check(status == 401 and 'error="invalid_token"' in headers.getheader("WWW-Authenticate"), "unknown token: invalid_token")
    verified()
    status, headers, _ = c.req("GET", "/resource")
    check(status == 401 and headers.getheader("WWW-Authenticate").startswith("DPoP"), "no Authorization: a DPoP challenge")

    # Other key types jwcrypto verifies.
    for kty, kw, alg in [("RSA", {"size": 2048}, "RS256"), ("RSA", {"size": 2048}, "PS256"),
                         ("OKP", {"crv": "Ed25519"}, "EdDSA")]:
        k = JWK.generate(kty=kty, **kw)
        status, data = password_grant(k, user="carol", alg=alg)
        hdr = [("Authorization", f"DPoP {data['access_token']}"),
               ("DPoP", proof(k, "GET", resource_url, token=data["access_token"], alg=alg))]
        status, _, _ = c.req("GET", "/resource", hdr)
        check(status == 200, f"{alg} proofs accepted")
        verified()
    small = JWK.generate(kty="RSA", size=1024)
    status, _, data = c.req("POST", "/token", [("DPoP", proof(small, "POST", token_url, alg="RS256"))],
                            form={"grant_type": "password", "username": "a", "password": "p", "client_id": "app"})
    check(status == 400 and data["error"] == "invalid_dpop_proof", "RSA 1024 key refused")
    refused("jwk")

    # --- nonces -------------------------------------------------------------------------------------------
    c.control(token_nonce=True)
    form = {"grant_type": "password", "username": "dave", "password": "pw", "client_id": "app"}
    status, headers, data = c.req("POST", "/token", [("DPoP", proof(key, "POST", token_url))], form=form)
    nonce = headers.getheader("DPoP-Nonce")
    check(status == 400 and data["error"] == "use_dpop_nonce" and data.get("error_description") and nonce,
          "token nonce: first answer use_dpop_nonce with DPoP-Nonce")
    refused("nonce")
    status, headers, data = c.req("POST", "/token", [("DPoP", proof(key, "POST", token_url, nonce=nonce))], form=form)
    check(status == 200 and headers.getheader("DPoP-Nonce") == nonce, "token nonce: the retry with it works, carries DPoP-Nonce")
    verified()
    status, headers, data = c.req("POST", "/token", [("DPoP", proof(key, "POST", token_url, nonce="stale"))], form=form)
    check(status == 400 and data["error"] == "use_dpop_nonce", "token nonce: a stale nonce refused")
    refused("nonce")
    c.control(token_nonce=False, resource_nonce=True)
    status, headers, _ = resource(key)
    challenge = headers.getheader("WWW-Authenticate") or ""
    nonce = headers.getheader("DPoP-Nonce")
    check(status == 401 and challenge.startswith('DPoP error="use_dpop_nonce", algs="ES256') and nonce,
          f"resource nonce: first answer 401 {challenge} with DPoP-Nonce")
    refused("nonce")
    status, headers, _ = resource(key, nonce=nonce)
    check(status == 200, "resource nonce: the retry with it works")
    verified()
    c.control(rotate_nonce=True)
    status, headers, _ = resource(key, nonce=nonce)
    fresh = headers.getheader("DPoP-Nonce")
    check(status == 200 and fresh and fresh != nonce, "rotate_nonce: a fresh nonce after a success")
    verified()
    refusal("the nonce before rotation", "nonce", resource(key, nonce=nonce), error="use_dpop_nonce")
    check(resource(key, nonce=fresh)[0] == 200, "the rotated nonce works")
    verified()
    c.control(resource_nonce=False, rotate_nonce=False)

    # --- refresh ------------------------------------------------------------------------------------------
    def refresh_grant(k, rt, **kw):
        headers = [("DPoP", proof(k, "POST", token_url, **kw))] if k is not None else []
        return c.req("POST", "/token", headers, form={"grant_type": "refresh_token", "refresh_token": rt,
                                                      "client_id": "app"})

    status, _, data = refresh_grant(other_key, refresh)
    check(status == 400 and data["error"] == "invalid_grant", "refresh with another key: invalid_grant")
    refused("jkt_mismatch")
    c.control(revoke_fails=True)
    status, _, data = c.req("POST", "/revoke", form={"token": refresh, "token_type_hint": "refresh_token",
                                                     "client_id": "app"})
    check(status == 503, "revoke_fails: 503")
    status, _, data = refresh_grant(other_key, refresh)
    check(status == 400 and data["error"] == "invalid_grant", "after a failed revoke: another key still invalid_grant")
    refused("jkt_mismatch")
    status, _, data = refresh_grant(None, refresh)
    check(status == 400 and data["error"] == "invalid_dpop_proof", "after a failed revoke: no proof refused")
    refused("missing", expected_proof=False)
    status, _, data = refresh_grant(key, refresh)
    check(status == 200 and data["token_type"] == "DPoP" and data["refresh_token"] != refresh,
          "after a failed revoke: the refresh token works with the right key (rotated)")
    verified()
    status, _, gone = refresh_grant(key, refresh)
    check(status == 400 and gone["error"] == "invalid_grant", "the rotated-out refresh token is refused")
    verified()
    c.control(revoke_fails=False)
    new_access, new_refresh = data["access_token"], data["refresh_token"]
    check(resource(key, tok=new_access)[0] == 200, "the refreshed access token works")
    verified()
    status, _, _ = c.req("POST", "/revoke", form={"token": new_refresh, "token_type_hint": "refresh_token",
                                                  "client_id": "app"})
    check(status == 200, "revoke: 200")
    check(refresh_grant(key, new_refresh)[2]["error"] == "invalid_grant", "the revoked refresh token is refused")
    verified()
    refusal("an access token of a revoked refresh token", None, resource(key, tok=new_access), error="invalid_token")
    verified()

    # --- bearer_downgrade, redirects ----------------------------------------------------------------------
    c.control(bearer_downgrade=True)
    status, data = password_grant(key, user="erin")
    check(status == 200 and data["token_type"] == "Bearer", "bearer_downgrade: token_type Bearer")
    check(c.req("GET", "/resource", [("Authorization", f"Bearer {data['access_token']}")])[0] == 200,
          "the unbound token works as Bearer")
    refusal("an unbound token with the DPoP scheme", None,
            resource(key, tok=data["access_token"]), error="invalid_token")
    verified()
    c.control(bearer_downgrade=False)
    status, headers, _ = c.req("GET", "/redirect-same?to=/resource/x")
    check(status == 302 and headers.getheader("Location") == "/resource/x", "redirect-same: 302 to the path")
    status, headers, _ = c.req("GET", "/redirect-other?to=http://localhost:9/resource")
    check(status == 302 and headers.getheader("Location") == "http://localhost:9/resource", "redirect-other: 302")

    # --- stats and log ------------------------------------------------------------------------------------
    _, _, stats = c.req("GET", "/stats")
    want_refused = {k: v for k, v in EXPECTED.items() if k not in ("proofs", "verified") and v}
    check(stats["proofs"] == EXPECTED["proofs"] and stats["verified"] == EXPECTED["verified"]
          and stats["refused"] == want_refused and stats["library"] == "jwcrypto 1.6.1",
          f"stats {stats} == proofs {EXPECTED['proofs']} verified {EXPECTED['verified']} refused {want_refused}")
    _, _, log = c.req("GET", "/log")
    text = json.dumps(log)
    check(all(t not in text for t in (access, refresh, new_access, new_refresh)), "the log holds no token value")
    check(all(set(e) == {"method", "path", "auth_scheme", "proof", "jkt", "status", "grant_type"} for e in log),
          "log entries have exactly the documented fields")
    _, kept = password_grant(key, user="frank")
    c.req("POST", "/reset")
    _, _, stats = c.req("GET", "/stats")
    check(stats["proofs"] == 0 and c.req("GET", "/log")[2] == [], "reset clears stats and log")
    check(resource(key, tok=kept["access_token"])[0] == 200, "reset keeps tokens")


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parent)
    sys.exit(main())
