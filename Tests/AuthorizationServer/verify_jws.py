"""Verifies compact JWS signatures with jwcrypto, for tests of what SessionKit signs. TEST ONLY.

    .venv/bin/python Tests/AuthorizationServer/verify_jws.py < items.json

Reads a JSON array of {"token": "<compact JWS>", "jwk": {<public JWK>}} from standard input and prints a JSON
array, one entry per item in order: {"valid": true|false, "header": {...}, "claims": {...}, "jkt": "...",
"error": "..."}. "header" and "claims" are present when the token parses, "jkt" (the key's RFC 7638 SHA-256
thumbprint, base64url, as jwcrypto computes it) when the key imports. The public key and the algorithm come from the
item and the token's header; jwcrypto checks the signature, nothing else: the caller checks the claims it cares
about.
"""

import json
import sys

from jwcrypto import jwk, jws
from jwcrypto.common import json_decode


def verify(item):
    token = item["token"]
    result = {"valid": False}
    try:
        signed = jws.JWS()
        signed.deserialize(token)
        result["header"] = json_decode(signed.objects["protected"])
        key = jwk.JWK(**item["jwk"])
        result["jkt"] = key.thumbprint()
        signed.verify(key, alg=result["header"].get("alg"))
        result["claims"] = json_decode(signed.payload)
        result["valid"] = True
    except Exception as error:  # jwcrypto raises several types; each is a refusal
        result["error"] = type(error).__name__
    return result


def main():
    items = json.load(sys.stdin)
    json.dump([verify(item) for item in items], sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
