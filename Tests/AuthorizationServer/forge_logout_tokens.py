"""Makes valid and forged OpenID Connect Back-Channel Logout tokens for testing a receiver. TEST ONLY.

    .venv/bin/python Tests/AuthorizationServer/forge_logout_tokens.py \\
        --issuer URL --client-id ID --now UNIX_SECONDS \\
        --valid NAME:SUB:SID [--valid ...] --target-sub SUB --target-sid SID [--max-age SECONDS]

Prints one JSON object to stdout:

    {"jwks": {"keys": [...]},
     "valid":  [{"name": ..., "token": ...}, ...],
     "forged": [{"name": ..., "check": ..., "token": ...}, ...]}

`jwks` holds the public parts of two signing keys generated afresh on every run, RSA-2048 `rsa-1` (RS256) and EC
P-256 `ec-1` (ES256); private keys are never printed or written anywhere. Each `--valid NAME:SUB:SID` makes one
valid token named NAME, with `sub` SUB and `sid` SID (an empty SUB or SID leaves that claim out), signed RS256 with
`typ: logout+jwt`, except that a NAME starting with `es256-` is signed ES256 and one starting with `untyped-` has no
`typ`. A valid token has iss, aud = client ID, iat = now, exp = now + 120, a fresh jti, and
events = {"http://schemas.openid.net/event/backchannel-logout": {}} (Back-Channel Logout 1.0 §2.4).

Every forgery names `--target-sub` and `--target-sid`, so that one a receiver wrongly accepted would end a real
session; each fails exactly one check, in the order the receiver applies them, and passes every check before it:

    format          not three base64url parts of JSON objects
    encrypted       five dot-separated parts: a JWE
    critical        a `crit` header parameter
    tokenType       a `typ` other than logout+jwt (an ID token's JWT)
    algorithm       alg none, or HS256 keyed with the RSA key's public JWK
    key             a kid the key set does not have
    signature       signed by another key under the key set's kid
    issuer          another iss
    audience        another aud
    expiry          exp missing, or passed
    issuedAt        iat missing, ahead of now, or older than --max-age
    logoutEvent     events missing, without the logout member, or with a member that is not an object
    nonce           a nonce (an ID token offered as a logout token)
    subjectOrSession neither sub nor sid, or an empty sid
    tokenID         no jti

`--self-check` verifies with jwcrypto that every valid token and every claim-level forgery carries a good
signature for the printed key set, so only the receiver's claim checks can catch the latter.

Uses jwcrypto for all JOSE work and no network. Independent of SessionKit: it prints data for any receiver.
"""

import argparse
import base64
import json
import sys
import uuid

from jwcrypto import jwk, jws

EVENT = "http://schemas.openid.net/event/backchannel-logout"


def b64url(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def compact(value):
    return json.dumps(value, separators=(",", ":"))


def sign(header, claims, key):
    """A compact JWS of `claims` under `header`, signed by jwcrypto with `key` for the header's alg."""
    token = jws.JWS(compact(claims).encode())
    token.add_signature(key, alg=header["alg"], protected=compact(header))
    return token.serialize(compact=True)


def unsigned(header, claims, signature=b""):
    return ".".join([b64url(compact(header)), b64url(compact(claims)), b64url(signature)])


def make(arguments):
    keys = {
        "rsa-1": jwk.JWK.generate(kty="RSA", size=2048, kid="rsa-1", use="sig", alg="RS256"),
        "ec-1": jwk.JWK.generate(kty="EC", crv="P-256", kid="ec-1", use="sig", alg="ES256"),
    }
    now = arguments.now

    def claims(sub=None, sid=None, **changes):
        body = {"iss": arguments.issuer, "aud": arguments.client_id, "iat": now, "exp": now + 120,
                "jti": str(uuid.uuid4()), "events": {EVENT: {}}}
        if sub:
            body["sub"] = sub
        if sid:
            body["sid"] = sid
        for name, value in changes.items():
            if value is None:
                body.pop(name, None)
            else:
                body[name] = value
        return body

    def header(alg="RS256", kid=None, typ="logout+jwt", **extra):
        value = {"alg": alg, "kid": kid or ("ec-1" if alg == "ES256" else "rsa-1")}
        if typ:
            value["typ"] = typ
        value.update(extra)
        return value

    def rs256(body, **header_changes):
        return sign(header(**header_changes), body, keys["rsa-1"])

    valid = []
    for spec in arguments.valid:
        name, sub, sid = spec.split(":")
        body = claims(sub=sub, sid=sid)
        if name.startswith("es256-"):
            token = sign(header(alg="ES256"), body, keys["ec-1"])
        elif name.startswith("untyped-"):
            token = sign(header(typ=None), body, keys["rsa-1"])
        else:
            token = rs256(body)
        valid.append({"name": name, "token": token})

    target = {"sub": arguments.target_sub, "sid": arguments.target_sid}
    stranger = jwk.JWK.generate(kty="RSA", size=2048, kid="rsa-1", use="sig", alg="RS256")
    hmac_key = jwk.JWK(kty="oct", k=b64url(keys["rsa-1"].export_public().encode()))
    forged = []

    def forge(name, check, token):
        forged.append({"name": name, "check": check, "token": token})

    forge("two parts", "format", unsigned(header(), claims(**target)).rsplit(".", 1)[0])
    forge("a JWE", "encrypted", "eyJhbGciOiJSU0EtT0FFUCJ9.a.b.c.d")
    # jwcrypto refuses to sign with a `crit` it does not know; the check comes before the signature's.
    forge("crit header", "critical", unsigned(header(crit=["exp"], exp=1), claims(**target), b"\x00" * 256))
    forge("an ID token's typ", "tokenType", rs256(claims(**target), typ="JWT"))
    forge("alg none", "algorithm", unsigned(header(alg="none"), claims(**target)))
    forge("HS256 with the public key", "algorithm",
          sign(header(alg="HS256"), claims(**target), hmac_key))
    forge("unknown kid", "key", sign(header(kid="rsa-9"), claims(**target), keys["rsa-1"]))
    forge("another key's signature", "signature", sign(header(), claims(**target), stranger))
    forge("another issuer", "issuer", rs256(claims(**target, iss=arguments.issuer + "/other")))
    forge("another audience", "audience", rs256(claims(**target, aud="another-client")))
    forge("no exp", "expiry", rs256(claims(**target, exp=None)))
    forge("expired", "expiry", rs256(claims(**target, iat=now - 700, exp=now - 600)))
    forge("no iat", "issuedAt", rs256(claims(**target, iat=None)))
    forge("iat ahead", "issuedAt", rs256(claims(**target, iat=now + 600, exp=now + 900)))
    forge("iat too old", "issuedAt",
          rs256(claims(**target, iat=now - arguments.max_age - 600, exp=now + 120)))
    forge("no events", "logoutEvent", rs256(claims(**target, events=None)))
    forge("another event", "logoutEvent", rs256(claims(**target, events={EVENT + "-not": {}})))
    forge("event not an object", "logoutEvent", rs256(claims(**target, events={EVENT: True})))
    forge("a nonce", "nonce", rs256(claims(**target, nonce="n-0S6_WzA2Mj")))
    forge("neither sub nor sid", "subjectOrSession", rs256(claims()))
    empty_sid = claims(sub=target["sub"])
    empty_sid["sid"] = ""
    forge("empty sid", "subjectOrSession", rs256(empty_sid))
    forge("no jti", "tokenID", rs256(claims(**target, jti=None)))

    jwks = {"keys": [key.export_public(as_dict=True) for key in keys.values()]}
    return {"jwks": jwks, "valid": valid, "forged": forged}


def self_check(result):
    key_set = jwk.JWKSet.from_json(json.dumps(result["jwks"]))
    claim_checks = ("issuer", "audience", "expiry", "issuedAt", "logoutEvent", "nonce", "subjectOrSession",
                    "tokenID", "tokenType", "critical")
    failures = 0
    for entry in result["valid"] + [f for f in result["forged"] if f["check"] in claim_checks]:
        token = jws.JWS()
        try:
            token.deserialize(entry["token"])
            header = json.loads(token.objects["protected"])
            token.verify(key_set.get_key(header["kid"]), alg=header["alg"])
        except Exception as error:  # noqa: BLE001 - every failure is reported
            if entry.get("check") != "critical":
                failures += 1
                print(f"self-check: {entry['name']} does not verify: {error}", file=sys.stderr)
    print(f"self-check: {len(result['valid'])} valid, {len(result['forged'])} forged, {failures} failures",
          file=sys.stderr)
    return failures == 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--now", type=int, required=True)
    parser.add_argument("--valid", action="append", default=[])
    parser.add_argument("--target-sub", required=True)
    parser.add_argument("--target-sid", required=True)
    parser.add_argument("--max-age", type=int, default=300)
    parser.add_argument("--self-check", action="store_true")
    arguments = parser.parse_args()
    result = make(arguments)
    if arguments.self_check and not self_check(result):
        sys.exit(1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
