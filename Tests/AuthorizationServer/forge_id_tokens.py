"""Makes valid and forged OpenID Connect ID tokens for testing an ID-token verifier. TEST ONLY.

    .venv/bin/python Tests/AuthorizationServer/forge_id_tokens.py \\
        --issuer URL --client-id ID --nonce N --now UNIX_SECONDS --access-token AT [--self-check]

Prints one JSON object to stdout:

    {"jwks": {"keys": [...]},
     "valid":  [{"name": ..., "token": ...}, ...],
     "forged": [{"name": ..., "check": ..., "token": ...}, ...]}

`jwks` holds the public parts (with `kid`, `use: sig`, `alg`) of five signing keys generated afresh on every run:
RSA-2048 `rsa-1` (RS256), RSA-2048 `rsa-pss` (PS256), EC P-256 `ec-1` (ES256), EC P-384 `ec-384` (ES384) and
Ed25519 `ed-1` (EdDSA). Private keys are never printed or written anywhere. A verifier given `--issuer`,
`--client-id`, the `--nonce` it sent, the clock `--now` and the `--access-token` that came with the ID token
must accept every `valid` token and refuse every `forged` one, each for the reason its `check` names.

Claims of a valid token: iss, sub "alice", aud = client ID, exp = now+300, iat = now, nbf = now,
auth_time = now-10, nonce, at_hash, name "Alice". at_hash (OIDC Core §3.1.3.6) is the base64url of the left half
of the hash of the ASCII access token, the hash being the one of the token's `alg`: SHA-256 for RS256, PS256 and
ES256, SHA-384 for ES384, SHA-512 for EdDSA with Ed25519 (the convention of OpenID libraries; OIDC Core names
no hash for EdDSA). Valid headers are {"alg", "kid", "typ": "JWT"} unless the token's name says otherwise.

`check` names, in the order `--self-check`'s reference verifier applies them (a forgery is made so that it fails
exactly its own check under that order, and passes every check before it):

    encrypted        five dot-separated parts: a JWE, not a JWS
    format           not three base64url parts, or header/payload not a JSON object
    algorithm        header alg is not one of RS256 PS256 ES256 ES384 EdDSA (none, HS256, ...)
    critical         a `crit` header parameter the verifier does not understand
    key              no JWKS key for the header (unknown kid; no kid while the JWKS has several keys) or the
                     kid's key does not fit the header alg (its kty, or its own `alg`, differs)
    signature        the signature does not verify with that key
    issuer           iss missing or not exactly --issuer
    subject          sub missing or not a non-empty string
    audience         aud missing or not containing the client ID
    authorizedParty  several audiences and no azp, or an azp other than the client ID
    expiry           exp missing, not a number, or not after now
    notBefore        nbf after now
    issuedAt         iat missing, not a number, or after now
    nonce            nonce missing or not --nonce
    accessTokenHash  at_hash present and not the access token's hash

The reference verifier allows no clock skew (the forged times are 600 s off, so any skew below that is fine).
`--self-check` runs it over everything (to stderr) and also checks with jwcrypto that every valid token verifies
against the printed JWKS, that jwcrypto itself refuses every forgery a signature-level check must catch, and that
the claim-level forgeries carry good signatures (so only the claim check can catch them).

Uses jwcrypto for all JOSE work and no network. Independent of SessionKit: it prints data for any verifier.
"""

import argparse
import base64
import hashlib
import hmac
import json
import sys

from jwcrypto import jwe, jwk, jws
from jwcrypto.jwa import JWA

SIGNING_ALGS = ("RS256", "PS256", "ES256", "ES384", "EdDSA")
AT_HASH = {"RS256": hashlib.sha256, "PS256": hashlib.sha256, "ES256": hashlib.sha256,
           "ES384": hashlib.sha384, "EdDSA": hashlib.sha512}
KEY_TYPES = {"RS256": "RSA", "PS256": "RSA", "ES256": "EC", "ES384": "EC", "EdDSA": "OKP"}
CHECKS = ("encrypted", "format", "algorithm", "critical", "key", "signature", "issuer", "subject", "audience",
          "authorizedParty", "expiry", "notBefore", "issuedAt", "nonce", "accessTokenHash")
CLAIM_CHECKS = CHECKS[CHECKS.index("issuer"):]


def b64url(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    if any(c in text for c in "+/="):
        raise ValueError("not base64url without padding")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def compact_json(value):
    return json.dumps(value, separators=(",", ":"))


def at_hash(access_token, alg):
    digest = AT_HASH[alg](access_token.encode("ascii")).digest()
    return b64url(digest[: len(digest) // 2])


def der_signature(raw):
    """An ECDSA r||s signature re-encoded as DER (SEQUENCE of two INTEGERs), as X.509 and OpenSSL use it and
    JWS does not (RFC 7518 §3.4 wants the fixed-length concatenation)."""
    def integer(value):
        value = value.lstrip(b"\x00") or b"\x00"
        if value[0] & 0x80:
            value = b"\x00" + value
        return b"\x02" + bytes([len(value)]) + value

    half = len(raw) // 2
    body = integer(raw[:half]) + integer(raw[half:])
    return b"\x30" + bytes([len(body)]) + body


def make_keys():
    return {
        "rsa-1": jwk.JWK.generate(kty="RSA", size=2048, kid="rsa-1", use="sig", alg="RS256"),
        "rsa-pss": jwk.JWK.generate(kty="RSA", size=2048, kid="rsa-pss", use="sig", alg="PS256"),
        "ec-1": jwk.JWK.generate(kty="EC", crv="P-256", kid="ec-1", use="sig", alg="ES256"),
        "ec-384": jwk.JWK.generate(kty="EC", crv="P-384", kid="ec-384", use="sig", alg="ES384"),
        "ed-1": jwk.JWK.generate(kty="OKP", crv="Ed25519", kid="ed-1", use="sig", alg="EdDSA"),
    }


def public_jwks(keys):
    return {"keys": [key.export_public(as_dict=True) for key in keys.values()]}


def signed(header, payload, key, alg=None):
    """A compact JWS over exactly these header and payload bytes, signed by jwcrypto's `alg` (default: the
    header's) with `key`, whatever the header claims."""
    header_bytes = header if isinstance(header, bytes) else compact_json(header).encode()
    payload_bytes = payload if isinstance(payload, bytes) else compact_json(payload).encode()
    signing_input = f"{b64url(header_bytes)}.{b64url(payload_bytes)}"
    signature = JWA.signing_alg(alg or header["alg"]).sign(key, signing_input.encode())
    return f"{signing_input}.{b64url(signature)}"


def forge(issuer, client_id, nonce, now, access_token):
    keys = make_keys()
    attacker = jwk.JWK.generate(kty="RSA", size=2048)  # stands for a key the verifier does not trust
    key_for_alg = {"RS256": keys["rsa-1"], "PS256": keys["rsa-pss"], "ES256": keys["ec-1"],
                   "ES384": keys["ec-384"], "EdDSA": keys["ed-1"]}

    def claims(alg="RS256", **changes):
        base = {"iss": issuer, "sub": "alice", "aud": client_id, "exp": now + 300, "iat": now, "nbf": now,
                "auth_time": now - 10, "nonce": nonce, "at_hash": at_hash(access_token, alg), "name": "Alice"}
        base.update(changes)
        return {name: value for name, value in base.items() if value is not None}  # None removes a claim

    def token(alg="RS256", header=None, **changes):
        key = key_for_alg[alg]
        return signed(header or {"alg": alg, "kid": key["kid"], "typ": "JWT"}, claims(alg, **changes), key)

    rs256 = token()
    head, payload, signature = rs256.split(".")

    valid = [{"name": alg.lower(), "token": token(alg)} for alg in SIGNING_ALGS]
    valid += [
        {"name": "several-audiences-with-azp", "token": token(aud=[client_id, "other"], azp=client_id)},
        {"name": "single-audience-list", "token": token(aud=[client_id])},
        {"name": "azp-is-client", "token": token(azp=client_id)},
        {"name": "no-at-hash", "token": token(at_hash=None)},
        {"name": "no-typ", "token": token(header={"alg": "RS256", "kid": "rsa-1"})},
        {"name": "no-nbf", "token": token(nbf=None)},
    ]

    mallory = b64url(compact_json(claims(sub="mallory")))
    hs256_input = f"{b64url(compact_json({'alg': 'HS256', 'kid': 'rsa-1', 'typ': 'JWT'}))}.{payload}"
    hs256_mac = hmac.new(keys["rsa-1"].export_to_pem(), hs256_input.encode(), hashlib.sha256).digest()
    encrypted = jwe.JWE(rs256.encode(), compact_json(
        {"alg": "RSA-OAEP", "enc": "A256GCM", "cty": "JWT", "kid": "enc-1"}))
    encrypted.add_recipient(jwk.JWK.generate(kty="RSA", size=2048, kid="enc-1"))
    es256_head, es256_payload, es256_signature = token("ES256").split(".")
    es256_der = f"{es256_head}.{es256_payload}.{b64url(der_signature(b64url_decode(es256_signature)))}"

    forged = [
        ("alg-none", "algorithm", f"{b64url(compact_json({'alg': 'none', 'typ': 'JWT'}))}.{payload}."),
        ("hs256-with-rsa-public-key", "algorithm", f"{hs256_input}.{b64url(hs256_mac)}"),
        ("unknown-kid", "key", signed({"alg": "RS256", "kid": "rsa-unknown", "typ": "JWT"}, claims(), attacker)),
        ("changed-payload", "signature", f"{head}.{mallory}.{signature}"),
        ("other-key-same-kid", "signature", signed({"alg": "RS256", "kid": "rsa-1", "typ": "JWT"}, claims(), attacker)),
        # Half the signature's bytes, re-encoded: cutting the text instead can leave a part that is not canonical
        # base64url, which a strict verifier refuses as a format error before any signature check.
        ("truncated-signature", "signature",
         f"{head}.{payload}.{b64url(b64url_decode(signature)[: len(b64url_decode(signature)) // 2])}"),
        ("empty-signature", "signature", f"{head}.{payload}."),
        ("es256-der-signature", "signature", es256_der),
        ("expired", "expiry", token(exp=now - 600, iat=now - 900, nbf=now - 900, auth_time=now - 910)),
        ("no-exp", "expiry", token(exp=None)),
        ("exp-not-a-number", "expiry", token(exp=str(now + 300))),
        ("not-yet-valid", "notBefore", token(nbf=now + 600)),
        ("issued-in-future", "issuedAt", token(iat=now + 600)),
        ("no-iat", "issuedAt", token(iat=None)),
        ("wrong-issuer", "issuer", token(iss=issuer + "/")),
        ("no-iss", "issuer", token(iss=None)),
        ("no-sub", "subject", token(sub=None)),
        ("empty-sub", "subject", token(sub="")),
        ("audience-without-client", "audience", token(aud="other")),
        ("no-aud", "audience", token(aud=None)),
        ("several-audiences-no-azp", "authorizedParty", token(aud=[client_id, "other"])),
        ("azp-other", "authorizedParty", token(aud=[client_id, "other"], azp="other")),
        ("azp-other-single-audience", "authorizedParty", token(azp="other")),
        ("nonce-missing", "nonce", token(nonce=None)),
        ("nonce-different", "nonce", token(nonce=nonce + "x")),
        ("unknown-crit", "critical", token(header={"alg": "RS256", "kid": "rsa-1", "typ": "JWT",
                                                   "crit": ["exp-claim"], "exp-claim": now + 300})),
        ("jwe", "encrypted", encrypted.serialize(compact=True)),
        ("rs256-header-on-ec-key", "key", signed({"alg": "RS256", "kid": "ec-1", "typ": "JWT"}, claims(), keys["rsa-1"])),
        ("es256-header-on-rsa-key", "key", signed({"alg": "ES256", "kid": "rsa-1", "typ": "JWT"}, claims("ES256"), keys["ec-1"])),
        ("no-kid-several-keys", "key", signed({"alg": "RS256", "typ": "JWT"}, claims(), keys["rsa-1"])),
        ("ps256-signature-under-rs256", "key",
         signed({"alg": "RS256", "kid": "rsa-pss", "typ": "JWT"}, claims(), keys["rsa-pss"], alg="PS256")),
        ("wrong-at-hash", "accessTokenHash", token(at_hash=at_hash(access_token + "x", "RS256"))),
        ("at-hash-of-wrong-hash", "accessTokenHash", token("ES384", at_hash=at_hash(access_token, "RS256"))),
        ("payload-not-json", "format", signed({"alg": "RS256", "kid": "rsa-1", "typ": "JWT"}, b"not json", keys["rsa-1"])),
        ("payload-json-array", "format", signed({"alg": "RS256", "kid": "rsa-1", "typ": "JWT"}, b"[1,2]", keys["rsa-1"])),
        ("two-part-token", "format", f"{head}.{payload}"),
        ("header-not-json", "format", f"{b64url('not json')}.{payload}.{signature}"),
        ("signature-not-base64url", "format", f"{head}.{payload}.{signature[:-2]}+/"),
    ]
    return {
        "jwks": public_jwks(keys),
        "valid": valid,
        "forged": [{"name": name, "check": check, "token": value} for name, check, value in forged],
    }


class Refused(Exception):
    def __init__(self, check, why):
        super().__init__(f"{check}: {why}")
        self.check = check


def reference_verify(token, jwks, issuer, client_id, nonce, now, access_token):
    """The checks the `check` names stand for, in their order. Raises Refused(check) or returns the claims."""
    parts = token.split(".")
    if len(parts) == 5:
        raise Refused("encrypted", "a JWE")
    if len(parts) != 3:
        raise Refused("format", f"{len(parts)} parts")
    try:
        header, payload = (json.loads(b64url_decode(part)) for part in parts[:2])
        b64url_decode(parts[2])
    except ValueError as error:
        raise Refused("format", str(error))
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise Refused("format", "not JSON objects")
    alg = header.get("alg")
    if alg not in SIGNING_ALGS:
        raise Refused("algorithm", repr(alg))
    if "crit" in header:
        raise Refused("critical", repr(header["crit"]))
    candidates = [key for key in jwks["keys"] if "kid" not in header or key.get("kid") == header["kid"]]
    if len(candidates) != 1:
        raise Refused("key", f"{len(candidates)} keys for kid {header.get('kid')!r}")
    key = candidates[0]
    if key["kty"] != KEY_TYPES[alg] or key.get("alg", alg) != alg or key.get("use", "sig") != "sig":
        raise Refused("key", f"{alg} with a {key['kty']} key for {key.get('alg')}")
    try:
        verifier = jws.JWS()
        verifier.deserialize(token)
        verifier.allowed_algs = [alg]
        verifier.verify(jwk.JWK(**key), alg=alg)
    except Exception as error:
        raise Refused("signature", repr(error))
    if payload.get("iss") != issuer:
        raise Refused("issuer", repr(payload.get("iss")))
    if not isinstance(payload.get("sub"), str) or not payload["sub"]:
        raise Refused("subject", repr(payload.get("sub")))
    audiences = payload.get("aud")
    audiences = [audiences] if isinstance(audiences, str) else audiences
    if not isinstance(audiences, list) or client_id not in audiences:
        raise Refused("audience", repr(payload.get("aud")))
    if ("azp" in payload or len(audiences) > 1) and payload.get("azp") != client_id:
        raise Refused("authorizedParty", repr(payload.get("azp")))
    number = lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number(payload.get("exp")) or payload["exp"] <= now:
        raise Refused("expiry", repr(payload.get("exp")))
    if "nbf" in payload and (not number(payload["nbf"]) or payload["nbf"] > now):
        raise Refused("notBefore", repr(payload["nbf"]))
    if not number(payload.get("iat")) or payload["iat"] > now:
        raise Refused("issuedAt", repr(payload.get("iat")))
    if payload.get("nonce") != nonce:
        raise Refused("nonce", repr(payload.get("nonce")))
    if "at_hash" in payload and payload["at_hash"] != at_hash(access_token, alg):
        raise Refused("accessTokenHash", repr(payload["at_hash"]))
    return payload


def jwcrypto_signature_ok(token, jwks):
    """jwcrypto's own verdict on the signature alone, against the whole JWKS (it picks the key by kid, or
    tries every key when there is none), with every algorithm it knows allowed."""
    try:
        verifier = jws.JWS()
        verifier.deserialize(token)
        verifier.allowed_algs = list(jws.default_allowed_algs)
        verifier.verify(jwk.JWKSet.from_json(json.dumps(jwks)))
        return True
    except Exception:
        return False


def self_check(result, arguments):
    jwks = result["jwks"]
    context = (arguments.issuer, arguments.client_id, arguments.nonce, arguments.now, arguments.access_token)
    assert [key["kid"] for key in jwks["keys"]] == ["rsa-1", "rsa-pss", "ec-1", "ec-384", "ed-1"]
    for key in jwks["keys"]:
        assert key["use"] == "sig" and key["alg"] and not {"d", "p", "q", "dp", "dq", "qi"} & key.keys(), key
    for entry in result["valid"]:
        assert jwcrypto_signature_ok(entry["token"], jwks), entry["name"]
        reference_verify(entry["token"], jwks, *context)
        print(f"valid   {entry['name']}: jwcrypto verifies it, the reference verifier accepts it", file=sys.stderr)
    assert len(result["forged"]) >= 20 and {entry["check"] for entry in result["forged"]} == set(CHECKS)
    # Forgeries jwcrypto accepts at the signature level on purpose: only a later check can catch them.
    signed_well = {"payload-not-json", "payload-json-array", "no-kid-several-keys"}
    for entry in result["forged"]:
        name, check = entry["name"], entry["check"]
        try:
            reference_verify(entry["token"], jwks, *context)
            raise AssertionError(f"{name} was accepted")
        except Refused as refusal:
            assert refusal.check == check, f"{name}: refused by {refusal.check}, not {check} ({refusal})"
        jwcrypto_ok = jwcrypto_signature_ok(entry["token"], jwks)
        if check in CLAIM_CHECKS or name in signed_well:
            assert jwcrypto_ok, f"{name} should carry a good signature"
            verdict = f"jwcrypto accepts its signature: only the {check} check catches it"
        else:
            assert not jwcrypto_ok, f"jwcrypto accepted {name}"
            verdict = "jwcrypto refuses it"
        print(f"forged  {name}: refused by {check}; {verdict}", file=sys.stderr)
    print(f"self-check: {len(result['valid'])} valid, {len(result['forged'])} forged, all as expected", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--nonce", required=True)
    parser.add_argument("--now", required=True, type=int, help="UNIX seconds the tokens' times count from")
    parser.add_argument("--access-token", required=True, help="the access token at_hash is computed from")
    parser.add_argument("--self-check", action="store_true", help="verify the output with jwcrypto (to stderr)")
    arguments = parser.parse_args()
    result = forge(arguments.issuer, arguments.client_id, arguments.nonce, arguments.now, arguments.access_token)
    if arguments.self_check:
        self_check(result, arguments)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
