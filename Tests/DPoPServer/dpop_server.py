"""TEST ONLY: a small DPoP (RFC 9449) authorization and resource server for SessionKit's integration tests.

Never deploy this. It keeps every token in memory, has no real users (any username, any non-empty password),
no client authentication, and a control endpoint that anybody on loopback can use to change its behaviour.

    python dpop_server.py [--port 0] [--ignore-stdin]

Binds 127.0.0.1 only (port 0 picks a free one), prints exactly one line `http://127.0.0.1:PORT` to stdout,
logs to stderr, and exits on SIGTERM, SIGINT, or when its stdin reaches end of file (so a test process that
dies never leaves it behind; `--ignore-stdin` turns that off for running it by hand with stdin at /dev/null).

Every JOSE operation (parsing the compact JWS, importing the `jwk`, verifying the signature, the RFC 7638
thumbprint) is jwcrypto's. What a proof must satisfy (RFC 9449 §4.3), in the order it is checked, with the
reason a refusal is counted under in `/stats`:

    malformed    not exactly one DPoP header, not a compact JWS, header or claims not JSON objects, `crit`,
                 `jti` not a non-empty string
    typ          header `typ` is not exactly `dpop+jwt`
    alg          `alg` is not one of ES256/ES384/ES512/RS256/RS384/RS512/PS256/PS384/PS512/EdDSA/Ed25519
                 (so never `none` or HS*)
    jwk          `jwk` missing, not a public key (private or symmetric members), not importable, not of the
                 type `alg` needs, RSA under 2048 bits
    signature    jwcrypto does not verify the signature with that `jwk`
    htm          `htm` is not the request method
    htu          `htu` is not the request URL (`http://` + Host header + path; query and fragment ignored,
                 scheme/host case, default port and percent-encoding normalised)
    iat          `iat` not a number within ±iat_window (default 60 s) of the server's clock
    nonce        nonce required for this endpoint (see /control) and `nonce` is not the current nonce
    ath          a token accompanies the request and `ath` is not base64url(SHA-256(token))
    jti_replay   `jti` was seen in a verified proof within the replay window
    jkt_mismatch the proof's key is not the key the token (access or refresh) is bound to
    missing      a proof is required and the request has no DPoP header (not counted in `proofs`)

See README.md next to this file for the endpoints.
"""

import argparse
import hashlib
import json
import os
import re
import secrets
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version as package_version
from urllib.parse import parse_qs, quote, urlsplit

from jwcrypto.common import base64url_encode, json_decode
from jwcrypto.jwk import JWK
from jwcrypto.jws import JWS

HOST = "127.0.0.1"
ALGS = ["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA", "Ed25519"]
ALGS_PARAM = " ".join(ALGS)
EC_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
PRIVATE_MEMBERS = {"d", "p", "q", "dp", "dq", "qi", "oth", "k", "priv"}
COMPACT = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$")
MAX_PROOF = 8192
MAX_BODY = 65536
ACCESS_LIFETIME = 3600
CONTROL_PATHS = {"/control", "/stats", "/log", "/reset"}
LOG_LIMIT = 100_000
DEFAULT_CONTROL = {
    "token_nonce": False,
    "resource_nonce": False,
    "revoke_fails": False,
    "bearer_downgrade": False,
    "iat_window": 60,
    "rotate_nonce": False,
}
LIBRARY = f"jwcrypto {package_version('jwcrypto')}"


class Refused(Exception):
    def __init__(self, reason, detail=""):
        super().__init__(detail or reason)
        self.reason = reason
        self.detail = detail or reason


def ath_of(token):
    return base64url_encode(hashlib.sha256(token.encode("ascii")).digest())


_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _normalize_path(path):
    # RFC 3986 §6.2.2: percent-encodings upper-cased, unreserved characters decoded; empty path is "/".
    def fix(m):
        ch = chr(int(m.group(1), 16))
        return ch if ch in _UNRESERVED else "%" + m.group(1).upper()

    path = re.sub(r"%([0-9A-Fa-f]{2})", fix, path)
    return path or "/"


def normalize_url(url):
    """(scheme, host, port, path) of an http(s) URL, or None when it is not one."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname or parts.username is not None:
            return None
        port = parts.port or (443 if scheme == "https" else 80)
    except (ValueError, TypeError):
        return None
    return scheme, parts.hostname.lower(), port, _normalize_path(parts.path)


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.tokens = {}  # token -> {kind, user, jkt, client_id, active, family, exp}
        self.seen_jti = {}  # jti -> forget after (monotonic)
        self.nonce = secrets.token_urlsafe(16)
        self.reset()

    def reset(self):
        self.control = dict(DEFAULT_CONTROL)
        self.proofs = 0
        self.verified = 0
        self.refused = {}
        self.log = []

    def record(self, entry, carried_proof):
        with self.lock:
            if carried_proof:
                self.proofs += 1
            result = entry["proof"]
            if result == "verified":
                self.verified += 1
            elif result is not None:
                self.refused[result] = self.refused.get(result, 0) + 1
            if len(self.log) < LOG_LIMIT:
                self.log.append(entry)

    def use_jti(self, jti):
        now = time.monotonic()
        with self.lock:
            if len(self.seen_jti) > 4096:
                for key in [k for k, until in self.seen_jti.items() if until < now]:
                    del self.seen_jti[key]
            until = self.seen_jti.get(jti)
            if until is not None and until >= now:
                return False
            # Kept well past the time an iat could still be accepted.
            self.seen_jti[jti] = now + 2 * float(self.control["iat_window"]) + 300
            return True

    def rotate_nonce(self):
        with self.lock:
            self.nonce = secrets.token_urlsafe(16)
            return self.nonce


STATE = State()


def verify_proof(raw, method, htu, token, nonce_required):
    """Checks a DPoP proof; returns (jkt, claims) or raises Refused. `jkt` is set on the exception when known."""
    jkt = None
    try:
        if len(raw) > MAX_PROOF or not COMPACT.match(raw):
            raise Refused("malformed", "the DPoP header is not one compact JWS")
        jws = JWS()
        try:
            jws.deserialize(raw)
            header = jws.jose_header
        except Exception:
            raise Refused("malformed", "the proof is not a JWS jwcrypto can parse") from None
        if not isinstance(header, dict):
            raise Refused("malformed", "the proof header is not a JSON object")
        if "crit" in header:
            raise Refused("malformed", "crit is not supported")
        if header.get("typ") != "dpop+jwt":
            raise Refused("typ", "typ must be dpop+jwt")
        alg = header.get("alg")
        if alg not in ALGS:
            raise Refused("alg", "alg is not an accepted asymmetric algorithm")
        jwk_json = header.get("jwk")
        if not isinstance(jwk_json, dict):
            raise Refused("jwk", "no jwk in the proof header")
        if jwk_json.get("kty") not in ("EC", "RSA", "OKP"):
            raise Refused("jwk", "the jwk is not an EC, RSA or OKP key")
        if PRIVATE_MEMBERS & set(jwk_json):
            raise Refused("jwk", "the jwk carries private key members")
        try:
            key = JWK(**jwk_json)
            public = key.has_public and not key.has_private and not key.is_symmetric
        except Exception:
            raise Refused("jwk", "the jwk cannot be imported") from None
        if not public:
            raise Refused("jwk", "the jwk is not a public key")
        kty, crv = key.get("kty"), key.get("crv")
        if alg in EC_CURVES:
            fits = kty == "EC" and crv == EC_CURVES[alg]
        elif alg in ("EdDSA", "Ed25519"):
            fits = kty == "OKP" and crv in (("Ed25519", "Ed448") if alg == "EdDSA" else ("Ed25519",))
        else:
            fits = kty == "RSA"
            if fits:
                try:
                    fits = key.get_op_key("verify").key_size >= 2048
                except Exception:
                    fits = False
        if not fits:
            raise Refused("jwk", "the jwk does not fit alg")
        jkt = key.thumbprint()
        jws.allowed_algs = ALGS
        try:
            jws.verify(key, alg=alg)
        except Exception:
            raise Refused("signature", "the signature does not verify with the jwk") from None
        try:
            claims = json_decode(jws.payload)
        except Exception:
            raise Refused("malformed", "the claims are not JSON") from None
        if not isinstance(claims, dict):
            raise Refused("malformed", "the claims are not a JSON object")
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti or len(jti) > 512:
            raise Refused("malformed", "jti must be a non-empty string")
        if claims.get("htm") != method:
            raise Refused("htm", "htm is not the request method")
        got = claims.get("htu")
        if not isinstance(got, str) or normalize_url(got) is None or normalize_url(got) != normalize_url(htu):
            raise Refused("htu", "htu is not the request URL")
        iat = claims.get("iat")
        window = float(STATE.control["iat_window"])
        if isinstance(iat, bool) or not isinstance(iat, (int, float)) or abs(time.time() - iat) > window:
            raise Refused("iat", "iat is not within the accepted window")
        if nonce_required:
            with STATE.lock:
                current = STATE.nonce
            if claims.get("nonce") != current:
                raise Refused("nonce", "a DPoP nonce is required" if "nonce" not in claims else "stale nonce")
        if token is not None:
            ath = claims.get("ath")
            if not isinstance(ath, str) or not secrets.compare_digest(ath, ath_of(token)):
                raise Refused("ath", "ath is not the hash of the access token")
        if not STATE.use_jti(jti):
            raise Refused("jti_replay", "jti was already used")
        return jkt, claims
    except Refused as refused:
        refused.jkt = jkt
        raise
    except Exception as error:  # never let an unforeseen input through: it is refused, and said on stderr
        sys.stderr.write(f"dpop_server: unexpected error checking a proof: {error!r}\n")
        refused = Refused("malformed", "the proof could not be checked")
        refused.jkt = jkt
        raise refused from None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "SessionKitDPoPTestServer/1"

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, fmt, *args):
        sys.stderr.write("dpop_server: %s %s\n" % (self.address_string(), fmt % args))

    # --- request plumbing -------------------------------------------------------------------------------

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

    def read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
                if len(body) > MAX_BODY:
                    raise ValueError("body too large")
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > MAX_BODY:
            raise ValueError("body too large")
        return self.rfile.read(length) if length else b""

    def dispatch(self):
        self.entry = None
        self.proof_carried = False
        self.extra_headers = []
        try:
            self.body = self.read_body()
        except (ValueError, OSError):
            self.close_connection = True
            self.answer(400, {"error": "invalid_request", "error_description": "unreadable body"}, log=False)
            return
        target = urlsplit(self.path)
        self.req_path = target.path or "/"
        self.query = parse_qs(target.query, keep_blank_values=True)
        if self.req_path in CONTROL_PATHS:
            return self.control_plane()
        self.entry = {"method": self.command, "path": self.req_path, "auth_scheme": None, "proof": None,
                      "jkt": None, "status": None, "grant_type": None}
        try:
            if self.req_path == "/token" and self.command == "POST":
                self.token_endpoint()
            elif self.req_path == "/revoke" and self.command == "POST":
                self.revoke_endpoint()
            elif self.req_path == "/resource" or self.req_path.startswith("/resource/"):
                self.resource_endpoint()
            elif self.req_path in ("/redirect-same", "/redirect-other"):
                self.redirect_endpoint()
            elif self.req_path in ("/token", "/revoke"):
                self.check_proof_if_any(nonce_required=False)
                self.answer(405, {"error": "method_not_allowed"}, [("Allow", "POST")])
            else:
                self.check_proof_if_any(nonce_required=False)
                self.answer(404, {"error": "not_found"})
        except Exception as error:  # a bug here must show up as a 500, never as an accepted request
            sys.stderr.write(f"dpop_server: internal error: {error!r}\n")
            self.answer(500, {"error": "server_error"})

    def answer(self, status, payload, headers=(), log=True):
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in list(headers) + self.extra_headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if log and self.entry is not None:
            self.entry["status"] = status
            STATE.record(self.entry, self.proof_carried)

    def redirect(self, location):
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.wfile.flush()
        self.entry["status"] = 302
        STATE.record(self.entry, self.proof_carried)

    # --- authorization and proofs -------------------------------------------------------------------------

    def authorization(self):
        """(scheme, token) from the Authorization header; scheme None when absent or unusable."""
        values = self.headers.get_all("Authorization") or []
        if len(values) != 1:
            return None, None
        parts = values[0].strip().split(" ")
        if len(parts) != 2 or not parts[1]:
            return None, None
        scheme = {"dpop": "DPoP", "bearer": "Bearer"}.get(parts[0].lower())
        return scheme, parts[1] if scheme else None

    def request_url(self):
        host = self.headers.get("Host") or f"{HOST}:{self.server.server_address[1]}"
        return f"http://{host}{self.req_path}"

    def check_proof(self, nonce_required, token=None, need=True):
        """Verifies the request's DPoP proof; returns (jkt, None) or (None, Refused). Records the outcome."""
        values = self.headers.get_all("DPoP") or []
        if not values:
            if need:
                self.entry["proof"] = "missing"
                return None, Refused("missing", "the request has no DPoP proof")
            return None, None
        self.proof_carried = True
        if len(values) > 1:
            self.entry["proof"] = "malformed"
            return None, Refused("malformed", "more than one DPoP header")
        try:
            jkt, _ = verify_proof(values[0].strip(), self.command, self.request_url(), token, nonce_required)
        except Refused as refused:
            self.entry["proof"] = refused.reason
            self.entry["jkt"] = refused.jkt
            return None, refused
        self.entry["proof"] = "verified"
        self.entry["jkt"] = jkt
        return jkt, None

    def check_proof_if_any(self, nonce_required):
        scheme, token = self.authorization()
        self.entry["auth_scheme"] = scheme
        return self.check_proof(nonce_required, token=token, need=False)

    def binding_refused(self):
        self.entry["proof"] = "jkt_mismatch"

    def nonce_header(self, rotate=False):
        nonce = STATE.rotate_nonce() if rotate else STATE.nonce
        self.extra_headers.append(("DPoP-Nonce", nonce))

    # --- endpoints ----------------------------------------------------------------------------------------

    def form(self):
        try:
            text = self.body.decode("utf-8")
            fields = parse_qs(text, keep_blank_values=True, strict_parsing=bool(text))
        except (UnicodeDecodeError, ValueError):
            return None
        if any(len(v) != 1 for v in fields.values()):
            return None
        return {k: v[0] for k, v in fields.items()}

    def issue(self, user, client_id, jkt, family, downgrade):
        now = time.time()
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        bound = None if downgrade else jkt
        with STATE.lock:
            STATE.tokens[access] = {"kind": "access", "user": user, "jkt": bound, "client_id": client_id,
                                    "active": True, "family": family, "exp": now + ACCESS_LIFETIME}
            STATE.tokens[refresh] = {"kind": "refresh", "user": user, "jkt": bound, "client_id": client_id,
                                     "active": True, "family": family, "exp": None}
        return {"access_token": access, "token_type": "Bearer" if downgrade else "DPoP",
                "expires_in": ACCESS_LIFETIME, "refresh_token": refresh, "scope": "read"}

    def token_error(self, status, error, description):
        self.answer(status, {"error": error, "error_description": description})

    def token_endpoint(self):
        control = dict(STATE.control)
        downgrade = control["bearer_downgrade"]
        nonces = control["token_nonce"] and not downgrade
        if nonces:
            self.nonce_header()
        form = self.form()
        if form is None:
            self.check_proof_if_any(nonce_required=False)
            return self.token_error(400, "invalid_request", "the body is not a form without repeated fields")
        grant = form.get("grant_type")
        self.entry["grant_type"] = grant
        if grant not in ("password", "refresh_token"):
            self.check_proof_if_any(nonce_required=False)
            return self.token_error(400, "unsupported_grant_type", "password and refresh_token only")
        if not form.get("client_id"):
            self.check_proof_if_any(nonce_required=False)
            return self.token_error(400, "invalid_request", "client_id is required")
        jkt, refused = self.check_proof(nonces, need=not downgrade)
        if refused is not None:
            if refused.reason == "nonce":
                return self.token_error(400, "use_dpop_nonce", "Authorization server requires nonce in DPoP proof")
            if not downgrade:
                return self.token_error(400, "invalid_dpop_proof", refused.detail)
            jkt = None
        if grant == "password":
            if "username" not in form or not form.get("password"):
                return self.token_error(400, "invalid_grant", "username and a non-empty password are required")
            result = self.issue(form["username"], form["client_id"], jkt, secrets.token_hex(8), downgrade)
        else:
            presented = form.get("refresh_token") or ""
            with STATE.lock:
                record = STATE.tokens.get(presented)
                usable = (record is not None and record["kind"] == "refresh" and record["active"]
                          and record["client_id"] == form["client_id"])
                if usable and record["jkt"] is not None and record["jkt"] != jkt:
                    usable = False
                    if jkt is not None:
                        self.binding_refused()
                if usable:
                    record["active"] = False
            if not usable:
                return self.token_error(400, "invalid_grant", "the refresh token is not usable with this key")
            result = self.issue(record["user"], record["client_id"], jkt, record["family"], downgrade)
        if nonces and control["rotate_nonce"]:
            self.extra_headers = [h for h in self.extra_headers if h[0] != "DPoP-Nonce"]
            self.nonce_header(rotate=True)
        self.answer(200, result)

    def revoke_endpoint(self):
        _, refused = self.check_proof_if_any(nonce_required=False)
        form = self.form()
        if form is None or not form.get("token"):
            return self.token_error(400, "invalid_request", "token is required")
        if refused is not None:
            return self.token_error(400, "invalid_dpop_proof", refused.detail)
        if STATE.control["revoke_fails"]:
            return self.token_error(503, "temporarily_unavailable", "revocation is failing (control revoke_fails)")
        with STATE.lock:
            record = STATE.tokens.get(form["token"])
            if record is not None and (not form.get("client_id") or form["client_id"] == record["client_id"]):
                if record["kind"] == "refresh":
                    for other in STATE.tokens.values():
                        if other["family"] == record["family"]:
                            other["active"] = False
                record["active"] = False
        self.answer(200, {})

    def resource_endpoint(self):
        control = dict(STATE.control)
        nonces = control["resource_nonce"]
        if nonces:
            self.nonce_header()
        scheme, token = self.authorization()
        self.entry["auth_scheme"] = scheme

        def challenge(error=None, description=None):
            value = f'DPoP error="{error}", algs="{ALGS_PARAM}"' if error else f'DPoP algs="{ALGS_PARAM}"'
            body = {"error": error or "invalid_request"}
            if description:
                body["error_description"] = description
            self.answer(401, body, [("WWW-Authenticate", value)])

        if scheme is None:
            self.check_proof(nonces, need=False)
            return challenge(None, "an Authorization header with the DPoP scheme is required")
        with STATE.lock:
            record = STATE.tokens.get(token)
            usable = (record is not None and record["kind"] == "access" and record["active"]
                      and record["exp"] > time.time())
            record = dict(record) if usable else None
        if scheme == "Bearer" or record is None or record["jkt"] is None:
            self.check_proof(nonces, token=token, need=False)
            if record is None:
                return challenge("invalid_token", "unknown, expired or revoked access token")
            if scheme == "Bearer" and record["jkt"] is not None:
                return challenge("invalid_token", "a DPoP-bound token must be sent with the DPoP scheme")
            if scheme == "DPoP" and record["jkt"] is None:
                return challenge("invalid_token", "a Bearer token must be sent with the Bearer scheme")
            # An unbound (bearer_downgrade) token sent as Bearer: served like any Bearer resource.
        else:
            jkt, refused = self.check_proof(nonces, token=token)
            if refused is not None:
                if refused.reason == "nonce":
                    return challenge("use_dpop_nonce", "Resource server requires nonce in DPoP proof")
                return challenge("invalid_dpop_proof", refused.detail)
            if jkt != record["jkt"]:
                self.binding_refused()
                return challenge("invalid_dpop_proof", "the proof's key is not the key the token is bound to")
        if nonces and control["rotate_nonce"]:
            self.extra_headers = [h for h in self.extra_headers if h[0] != "DPoP-Nonce"]
            self.nonce_header(rotate=True)
        self.answer(200, {"user": record["user"], "method": self.command, "path": self.req_path})

    def redirect_endpoint(self):
        self.check_proof_if_any(nonce_required=False)
        target = (self.query.get("to") or [""])[0]
        if self.req_path == "/redirect-same":
            if not target.startswith("/") or target.startswith("//") or "\\" in target:
                return self.answer(400, {"error": "invalid_request", "error_description": "to must be a path"})
            return self.redirect(quote(target, safe="/?&=%:@!$'()*+,;~-._"))
        if any(ord(c) < 0x21 or ord(c) == 0x7F for c in target):
            return self.answer(400, {"error": "invalid_request", "error_description": "to must be a URL"})
        origin = normalize_url(target)
        if origin is None:
            return self.answer(400, {"error": "invalid_request", "error_description": "to must be an http(s) URL"})
        if origin[:3] == (normalize_url(self.request_url()) or ())[:3]:
            return self.answer(400, {"error": "invalid_request", "error_description": "to must be another origin"})
        return self.redirect(target)

    def control_plane(self):
        path, method = self.req_path, self.command
        if path == "/stats" and method == "GET":
            with STATE.lock:
                stats = {"proofs": STATE.proofs, "verified": STATE.verified, "refused": dict(STATE.refused),
                         "library": LIBRARY}
            return self.answer(200, stats)
        if path == "/log" and method == "GET":
            with STATE.lock:
                log = [dict(e) for e in STATE.log]
            return self.answer(200, log)
        if path == "/reset" and method == "POST":
            with STATE.lock:
                STATE.reset()
            return self.answer(200, {})
        if path == "/control" and method == "POST":
            try:
                changes = json.loads(self.body or b"{}")
            except ValueError:
                changes = None
            if not isinstance(changes, dict):
                return self.answer(400, {"error": "the body must be a JSON object"})
            for key, value in changes.items():
                if key == "iat_window":
                    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
                else:
                    ok = key in DEFAULT_CONTROL and isinstance(value, bool)
                if not ok:
                    return self.answer(400, {"error": f"bad control {key!r}"})
            with STATE.lock:
                STATE.control.update(changes)
                current = dict(STATE.control)
            return self.answer(200, current)
        return self.answer(404 if method in ("GET", "POST") else 405, {"error": "not_found"})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default listen backlog is 5. A burst of connections (FoundationNetworking opens one per
    # concurrent request) on a loaded machine can fill it; Linux then drops the handshake's last ACK and
    # retransmits its SYN-ACK after 1, 2, 4, 8, 16 s, so a request sent on such a connection waits past a test's
    # 30 s bound: the "token endpoint did not answer in time" seen now and then on the URLSession pass.
    request_queue_size = 128


def main():
    parser = argparse.ArgumentParser(description="TEST ONLY DPoP server on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--ignore-stdin", action="store_true", help="do not exit when stdin closes")
    args = parser.parse_args()

    server = Server((HOST, args.port), Handler)
    stop = threading.Event()

    def on_signal(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if not args.ignore_stdin:
        def watch_stdin():
            try:
                while os.read(0, 4096):
                    pass
            except OSError:
                pass
            stop.set()

        threading.Thread(target=watch_stdin, daemon=True, name="stdin-watch").start()

    threading.Thread(target=server.serve_forever, daemon=True, name="serve").start()
    sys.stdout.write(f"http://{HOST}:{server.server_address[1]}\n")
    sys.stdout.flush()
    sys.stderr.write(f"dpop_server: TEST ONLY, serving on http://{HOST}:{server.server_address[1]} ({LIBRARY})\n")
    while not stop.wait(0.5):
        pass
    sys.stderr.write("dpop_server: stopping\n")
    server.shutdown()
    server.server_close()


if __name__ == "__main__":
    main()
