"""An outside oracle for SessionKit's cryptography tests: pyca/cryptography and jwcrypto, not SessionKit.

Run by Tests/SessionKitTests/CryptoVectorTests.swift with the venv's python (scripts/test exports it as
SESSIONKIT_CRYPTO_PYTHON). One subcommand a run; JSON lines in on stdin where a command reads, JSON lines out.
Byte strings are lowercase hex. Nothing printed is secret: the keys made here are thrown away after the run.

  rsa-signatures     RSA keys (2048 and 3072 bits) and signatures over a few messages: PKCS #1 v1.5 and PSS as
                     JOSE defines them (valid), and PSS with another salt length or MGF1 hash (invalid for JOSE);
                     each key's PKCS #1 RSAPublicKey DER as well.
  verify-es256       for each line {"x", "y", "message", "signature"}: whether the raw r || s signature is a valid
                     ECDSA P-256 SHA-256 signature, as {"valid": bool}.
  thumbprint         for each line, a JWK object: {"thumbprint": RFC 7638 thumbprint by jwcrypto}.
"""

import json
import os
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from jwcrypto import jwk

HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}


def emit(record):
    print(json.dumps(record), flush=True)


def magnitude(number):
    return number.to_bytes((number.bit_length() + 7) // 8, "big").hex()


def rsa_signatures():
    messages = [b"", b"\x00", b"eyJhbGciOiJQUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9", os.urandom(1000)]
    for bits in (2048, 3072):
        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        public = key.public_key()
        numbers = public.public_numbers()
        der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.PKCS1)
        base = {"n": magnitude(numbers.n), "e": magnitude(numbers.e), "der": der.hex()}
        for size, algorithm in HASHES.items():
            for message in messages:
                def case(name, signature, valid):
                    emit(dict(base, alg=name, message=message.hex(), signature=signature.hex(), valid=valid))

                case("RS" + size, key.sign(message, padding.PKCS1v15(), algorithm()), True)
                jose = padding.PSS(mgf=padding.MGF1(algorithm()), salt_length=padding.PSS.DIGEST_LENGTH)
                case("PS" + size, key.sign(message, jose, algorithm()), True)
                # RFC 7518 §3.5 fixes the salt length to the hash's and MGF1's hash to the signature's; a
                # signature that is valid PSS with other parameters is not a valid PS256/384/512 signature.
                for salt in (0, 10, algorithm.digest_size + 1):
                    other = padding.PSS(mgf=padding.MGF1(algorithm()), salt_length=salt)
                    case("PS" + size, key.sign(message, other, algorithm()), False)
                other_mgf = hashes.SHA1() if size != "256" else hashes.SHA512()
                other = padding.PSS(mgf=padding.MGF1(other_mgf), salt_length=algorithm.digest_size)
                case("PS" + size, key.sign(message, other, algorithm()), False)
                # The right parameters, the wrong scheme.
                case("RS" + size, key.sign(message, jose, algorithm()), False)
                case("PS" + size, key.sign(message, padding.PKCS1v15(), algorithm()), False)


def verify_es256():
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        x, y = int(case["x"], 16), int(case["y"], 16)
        signature = bytes.fromhex(case["signature"])
        try:
            key = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
            if len(signature) != 64:
                raise InvalidSignature()
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            key.verify(der, bytes.fromhex(case["message"]), ec.ECDSA(hashes.SHA256()))
            emit({"valid": True})
        except (InvalidSignature, ValueError):
            emit({"valid": False})


def thumbprint():
    for line in sys.stdin:
        if line.strip():
            emit({"thumbprint": jwk.JWK(**json.loads(line)).thumbprint()})


COMMANDS = {"rsa-signatures": rsa_signatures, "verify-es256": verify_es256, "thumbprint": thumbprint}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in COMMANDS:
        sys.exit("usage: crypto_oracle.py " + "|".join(COMMANDS))
    COMMANDS[sys.argv[1]]()
