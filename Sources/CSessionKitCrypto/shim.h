// The OpenSSL 3 libcrypto calls SessionKit makes on Linux, as small functions Swift calls with plain buffers.
//
// Rules every function here keeps, so the Swift side never owns an OpenSSL object:
// - each function creates, uses and frees every OpenSSL object it touches, on every path (one `done:` label);
// - each clears the thread's OpenSSL error queue before returning, so a failure here never leaks into an
//   unrelated later call's error report;
// - lengths are checked here as well as in Swift, and private scalars live in secure-heap BIGNUMs that are
//   cleared when freed;
// - only OpenSSL 3 APIs (EVP_PKEY_fromdata, EVP_Digest{Sign,Verify}*, OSSL_PARAM_BLD), no RSA_* or EC_KEY_*.
// SwiftPM does not track this header as an input of the Swift files that import it: after editing it, touch
// Sources/SessionKit/Crypto/PlatformCrypto+OpenSSL.swift (scripts/mutants does) or the old code stays built.
// Status: 1 is success (or "the signature is valid"), 0 is "the signature is not valid", -1 is a failure to
// build a key or run the operation. Messages may be empty: a non-null pointer is substituted for OpenSSL.
#ifndef SESSIONKIT_CRYPTO_SHIM_H
#define SESSIONKIT_CRYPTO_SHIM_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>

/// The digests SessionKit uses, by the numbers Swift passes.
enum {
    SK_DIGEST_SHA256 = 1,
    SK_DIGEST_SHA384 = 2,
    SK_DIGEST_SHA512 = 3,
};

/// The elliptic curves SessionKit verifies with, by the numbers Swift passes.
enum {
    SK_CURVE_P256 = 1,
    SK_CURVE_P384 = 2,
};

/// The RSA signature paddings, by the numbers Swift passes.
enum {
    SK_RSA_PKCS1 = 1,
    SK_RSA_PSS = 2,
};

/// The largest RSA modulus accepted, in bytes (16384 bits): bounds the work an attacker-supplied key can cause.
#define SK_RSA_MAX_MODULUS_BYTES 2048
/// The largest RSA public exponent accepted, in bytes (OpenSSL refuses exponents over 64 bits for large moduli).
#define SK_RSA_MAX_EXPONENT_BYTES 8

static inline const EVP_MD *sk_md(int digest) {
    switch (digest) {
    case SK_DIGEST_SHA256: return EVP_sha256();
    case SK_DIGEST_SHA384: return EVP_sha384();
    case SK_DIGEST_SHA512: return EVP_sha512();
    default: return NULL;
    }
}

static inline const char *sk_curve_name(int curve) {
    switch (curve) {
    case SK_CURVE_P256: return "P-256";
    case SK_CURVE_P384: return "P-384";
    default: return NULL;
    }
}

static inline int sk_curve_nid(int curve) {
    switch (curve) {
    case SK_CURVE_P256: return NID_X9_62_prime256v1;
    case SK_CURVE_P384: return NID_secp384r1;
    default: return NID_undef;
    }
}

static inline size_t sk_curve_size(int curve) {
    switch (curve) {
    case SK_CURVE_P256: return 32;
    case SK_CURVE_P384: return 48;
    default: return 0;
    }
}

/// A non-null pointer for an empty message: some OpenSSL paths treat a null input as an error.
static inline const uint8_t *sk_nonnull(const uint8_t *bytes) {
    static const uint8_t empty = 0;
    return bytes != NULL ? bytes : &empty;
}

/// The digest of `message` into `out` (`out_capacity` bytes, at least the digest's size); `*out_length` is set.
static inline int sk_digest(int digest, const uint8_t *message, size_t message_length, uint8_t *out,
                            size_t out_capacity, size_t *out_length) {
    int status = -1;
    const EVP_MD *md = sk_md(digest);
    unsigned int length = 0;
    if (md == NULL || out == NULL || out_length == NULL || out_capacity < (size_t)EVP_MD_get_size(md)) goto done;
    if (EVP_Digest(sk_nonnull(message), message_length, out, &length, md, NULL) != 1) goto done;
    *out_length = length;
    status = 1;
done:
    ERR_clear_error();
    return status;
}

/// `count` bytes from OpenSSL's CSPRNG (RAND_bytes) into `out`.
static inline int sk_random_bytes(uint8_t *out, size_t count) {
    int status = -1;
    if (count == 0) { status = 1; goto done; }
    if (out == NULL || count > INT_MAX) goto done;
    if (RAND_bytes(out, (int)count) == 1) status = 1;
done:
    ERR_clear_error();
    return status;
}

/// The key of `type` ("RSA", "EC") whose `selection` (EVP_PKEY_PUBLIC_KEY, EVP_PKEY_KEYPAIR) the parameters in
/// `builder` describe; NULL when OpenSSL refuses them. Frees what it makes besides the key; the caller frees the
/// builder and the key.
static inline EVP_PKEY *sk_key_from_builder(const char *type, int selection, OSSL_PARAM_BLD *builder) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(builder);
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (params == NULL || context == NULL || EVP_PKEY_fromdata_init(context) != 1
        || EVP_PKEY_fromdata(context, &key, selection, params) != 1) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    EVP_PKEY_CTX_free(context);
    // The parameters may hold a private scalar: OpenSSL clears secure-heap parameters as it frees them.
    OSSL_PARAM_free(params);
    return key;
}

/// An RSA public key from big-endian modulus and exponent; NULL when OpenSSL refuses them. The caller frees it.
static inline EVP_PKEY *sk_rsa_public_key(const uint8_t *modulus, size_t modulus_length, const uint8_t *exponent,
                                          size_t exponent_length) {
    EVP_PKEY *key = NULL;
    BIGNUM *n = NULL, *e = NULL;
    OSSL_PARAM_BLD *builder = NULL;
    if (modulus == NULL || exponent == NULL || modulus_length == 0 || exponent_length == 0) goto done;
    if (modulus_length > SK_RSA_MAX_MODULUS_BYTES || exponent_length > SK_RSA_MAX_EXPONENT_BYTES) goto done;
    n = BN_bin2bn(modulus, (int)modulus_length, NULL);
    e = BN_bin2bn(exponent, (int)exponent_length, NULL);
    if (n == NULL || e == NULL) goto done;
    builder = OSSL_PARAM_BLD_new();
    if (builder == NULL || OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_N, n) != 1
        || OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_E, e) != 1)
        goto done;
    key = sk_key_from_builder("RSA", EVP_PKEY_PUBLIC_KEY, builder);
done:
    OSSL_PARAM_BLD_free(builder);
    BN_free(n);
    BN_free(e);
    return key;
}

/// An EC public key on `curve` from its affine coordinates (each exactly the curve's size), checked to be a
/// valid point of the group (on the curve, not the point at infinity); NULL otherwise. The caller frees it.
static inline EVP_PKEY *sk_ec_public_key(int curve, const uint8_t *x, const uint8_t *y, size_t coordinate_length) {
    EVP_PKEY *key = NULL, *candidate = NULL;
    OSSL_PARAM_BLD *builder = NULL;
    EVP_PKEY_CTX *check = NULL;
    uint8_t point[1 + 2 * 48];
    const size_t size = sk_curve_size(curve);
    if (size == 0 || x == NULL || y == NULL || coordinate_length != size) goto done;
    // The uncompressed SEC 1 encoding: 0x04 || x || y.
    point[0] = 0x04;
    memcpy(point + 1, x, size);
    memcpy(point + 1 + size, y, size);
    builder = OSSL_PARAM_BLD_new();
    if (builder == NULL
        || OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, sk_curve_name(curve), 0) != 1
        || OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, 1 + 2 * size) != 1)
        goto done;
    candidate = sk_key_from_builder("EC", EVP_PKEY_PUBLIC_KEY, builder);
    if (candidate == NULL) goto done;
    // Decoding already refuses a point off the curve; the explicit check says so and also refuses infinity.
    check = EVP_PKEY_CTX_new_from_pkey(NULL, candidate, NULL);
    if (check == NULL || EVP_PKEY_public_check(check) != 1) goto done;
    key = candidate;
    candidate = NULL;
done:
    EVP_PKEY_CTX_free(check);
    EVP_PKEY_free(candidate);
    OSSL_PARAM_BLD_free(builder);
    return key;
}

/// Verifies `signature` over `message` with `key`; `padding` is SK_RSA_PKCS1 or SK_RSA_PSS for RSA keys, 0
/// otherwise; `digest` 0 for Ed25519 (which hashes internally). Frees nothing it did not create.
static inline int sk_verify_with_key(EVP_PKEY *key, int digest, int padding, const uint8_t *message,
                                     size_t message_length, const uint8_t *signature, size_t signature_length) {
    int status = -1;
    EVP_MD_CTX *context = NULL;
    EVP_PKEY_CTX *key_context = NULL;
    const EVP_MD *md = digest == 0 ? NULL : sk_md(digest);
    if (key == NULL || signature == NULL || (digest != 0 && md == NULL)) goto done;
    context = EVP_MD_CTX_new();
    if (context == NULL || EVP_DigestVerifyInit(context, &key_context, md, NULL, key) != 1) goto done;
    if (padding == SK_RSA_PKCS1) {
        if (EVP_PKEY_CTX_set_rsa_padding(key_context, RSA_PKCS1_PADDING) != 1) goto done;
    } else if (padding == SK_RSA_PSS) {
        // RFC 7518 §3.5: the salt is as long as the hash, and MGF1 uses the same hash as the signature.
        if (EVP_PKEY_CTX_set_rsa_padding(key_context, RSA_PKCS1_PSS_PADDING) != 1
            || EVP_PKEY_CTX_set_rsa_pss_saltlen(key_context, RSA_PSS_SALTLEN_DIGEST) != 1
            || EVP_PKEY_CTX_set_rsa_mgf1_md(key_context, md) != 1)
            goto done;
    }
    status = EVP_DigestVerify(context, signature, signature_length, sk_nonnull(message), message_length) == 1 ? 1 : 0;
done:
    EVP_MD_CTX_free(context);
    return status;
}

/// Verifies an RSA signature (PKCS #1 v1.5 or PSS, RFC 8017 §8) over `message` with the key (n, e).
static inline int sk_verify_rsa(const uint8_t *modulus, size_t modulus_length, const uint8_t *exponent,
                                size_t exponent_length, int digest, int padding, const uint8_t *message,
                                size_t message_length, const uint8_t *signature, size_t signature_length) {
    int status = -1;
    EVP_PKEY *key = NULL;
    if (padding != SK_RSA_PKCS1 && padding != SK_RSA_PSS) goto done;
    key = sk_rsa_public_key(modulus, modulus_length, exponent, exponent_length);
    if (key == NULL) goto done;
    status = sk_verify_with_key(key, digest, padding, message, message_length, signature, signature_length);
done:
    EVP_PKEY_free(key);
    ERR_clear_error();
    return status;
}

/// Whether (x, y) is a valid public point on `curve`: 1 yes, -1 no.
static inline int sk_ec_check_public_key(int curve, const uint8_t *x, const uint8_t *y, size_t coordinate_length) {
    EVP_PKEY *key = sk_ec_public_key(curve, x, y, coordinate_length);
    int status = key != NULL ? 1 : -1;
    EVP_PKEY_free(key);
    ERR_clear_error();
    return status;
}

/// Verifies a JOSE ECDSA signature (RFC 7518 §3.4: r || s, each exactly the curve's size) over `message`,
/// hashed with `digest`, with the public point (x, y) on `curve`. The signature is re-encoded as the DER
/// ECDSA-Sig-Value OpenSSL verifies.
static inline int sk_verify_ecdsa(int curve, const uint8_t *x, const uint8_t *y, size_t coordinate_length,
                                  int digest, const uint8_t *message, size_t message_length,
                                  const uint8_t *signature, size_t signature_length) {
    int status = -1;
    EVP_PKEY *key = NULL;
    ECDSA_SIG *value = NULL;
    BIGNUM *r = NULL, *s = NULL;
    uint8_t *der = NULL;
    int der_length = 0;
    const size_t size = sk_curve_size(curve);
    if (size == 0 || signature == NULL) goto done;
    // A wrong length is an invalid signature, not an error: an attacker chooses it.
    if (signature_length != 2 * size) { status = 0; goto done; }
    key = sk_ec_public_key(curve, x, y, coordinate_length);
    if (key == NULL) goto done;
    r = BN_bin2bn(signature, (int)size, NULL);
    s = BN_bin2bn(signature + size, (int)size, NULL);
    value = ECDSA_SIG_new();
    if (r == NULL || s == NULL || value == NULL || ECDSA_SIG_set0(value, r, s) != 1) goto done;
    r = NULL; // owned by value now
    s = NULL;
    der_length = i2d_ECDSA_SIG(value, &der);
    if (der_length <= 0 || der == NULL) goto done;
    status = sk_verify_with_key(key, digest, 0, message, message_length, der, (size_t)der_length);
done:
    OPENSSL_free(der);
    ECDSA_SIG_free(value);
    BN_free(r);
    BN_free(s);
    EVP_PKEY_free(key);
    ERR_clear_error();
    return status;
}

/// Verifies an Ed25519 signature (RFC 8032 §5.1.7, pure EdDSA) over `message` with the 32-byte public key.
static inline int sk_verify_ed25519(const uint8_t *public_key, size_t public_key_length, const uint8_t *message,
                                    size_t message_length, const uint8_t *signature, size_t signature_length) {
    int status = -1;
    EVP_PKEY *key = NULL;
    if (public_key == NULL || signature == NULL || public_key_length != 32) goto done;
    if (signature_length != 64) { status = 0; goto done; }
    key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, public_key, public_key_length);
    if (key == NULL) goto done;
    status = sk_verify_with_key(key, 0, 0, message, message_length, signature, signature_length);
done:
    EVP_PKEY_free(key);
    ERR_clear_error();
    return status;
}

/// The public point (x, y) of the P-256 private scalar `scalar` (32 bytes), which must be in [1, n - 1].
static inline int sk_p256_public_key(const uint8_t *scalar, size_t scalar_length, uint8_t *x, uint8_t *y) {
    int status = -1;
    EC_GROUP *group = NULL;
    EC_POINT *point = NULL;
    BIGNUM *d = NULL, *px = NULL, *py = NULL;
    BN_CTX *bn_context = NULL;
    if (scalar == NULL || x == NULL || y == NULL || scalar_length != 32) goto done;
    group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    d = BN_secure_new();
    px = BN_new();
    py = BN_new();
    bn_context = BN_CTX_secure_new();
    if (group == NULL || d == NULL || px == NULL || py == NULL || bn_context == NULL) goto done;
    if (BN_bin2bn(scalar, 32, d) == NULL) goto done;
    if (BN_is_zero(d) || BN_cmp(d, EC_GROUP_get0_order(group)) >= 0) goto done;
    point = EC_POINT_new(group);
    if (point == NULL || EC_POINT_mul(group, point, d, NULL, NULL, bn_context) != 1) goto done;
    if (EC_POINT_get_affine_coordinates(group, point, px, py, bn_context) != 1) goto done;
    if (BN_bn2binpad(px, x, 32) != 32 || BN_bn2binpad(py, y, 32) != 32) goto done;
    status = 1;
done:
    BN_CTX_free(bn_context);
    EC_POINT_free(point);
    BN_clear_free(d);
    BN_free(px);
    BN_free(py);
    EC_GROUP_free(group);
    ERR_clear_error();
    return status;
}

/// A new P-256 key pair: the private scalar and the public point, 32 bytes each.
static inline int sk_p256_generate(uint8_t *scalar, uint8_t *x, uint8_t *y) {
    int status = -1;
    EVP_PKEY *key = NULL;
    BIGNUM *d = NULL, *px = NULL, *py = NULL;
    if (scalar == NULL || x == NULL || y == NULL) goto done;
    key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (key == NULL) goto done;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_PRIV_KEY, &d) != 1
        || EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &px) != 1
        || EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &py) != 1)
        goto done;
    if (BN_bn2binpad(d, scalar, 32) != 32 || BN_bn2binpad(px, x, 32) != 32 || BN_bn2binpad(py, y, 32) != 32) {
        OPENSSL_cleanse(scalar, 32);
        goto done;
    }
    status = 1;
done:
    BN_clear_free(d);
    BN_free(px);
    BN_free(py);
    EVP_PKEY_free(key);
    ERR_clear_error();
    return status;
}

/// The P-256 key pair (scalar, x, y) as an OpenSSL key object, made once per key so each signature only signs;
/// NULL when OpenSSL refuses it. The caller frees it with `sk_p256_key_free`. OpenSSL 3 lets threads share a key
/// object for signing: each signature has its own context and nothing here changes the key.
static inline void *sk_p256_key_new(const uint8_t *scalar, const uint8_t *x, const uint8_t *y) {
    EVP_PKEY *key = NULL;
    OSSL_PARAM_BLD *builder = NULL;
    BIGNUM *d = NULL;
    uint8_t point[65];
    if (scalar == NULL || x == NULL || y == NULL) goto done;
    point[0] = 0x04;
    memcpy(point + 1, x, 32);
    memcpy(point + 33, y, 32);
    d = BN_secure_new();
    if (d == NULL || BN_bin2bn(scalar, 32, d) == NULL) goto done;
    builder = OSSL_PARAM_BLD_new();
    if (builder == NULL || OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) != 1
        || OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point) != 1
        || OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_PRIV_KEY, d) != 1)
        goto done;
    key = sk_key_from_builder("EC", EVP_PKEY_KEYPAIR, builder);
done:
    OSSL_PARAM_BLD_free(builder);
    BN_clear_free(d);
    ERR_clear_error();
    return key;
}

/// Frees a key from `sk_p256_key_new`; OpenSSL clears the private scalar as it frees it. NULL is allowed.
static inline void sk_p256_key_free(void *key) {
    EVP_PKEY_free((EVP_PKEY *)key);
}

/// An ES256 signature (RFC 7518 §3.4) over `message` with a key from `sk_p256_key_new`: SHA-256, ECDSA, written
/// to `signature` as r || s, 32 bytes each.
static inline int sk_p256_sign(void *key, const uint8_t *message, size_t message_length, uint8_t *signature) {
    int status = -1;
    EVP_MD_CTX *md_context = NULL;
    ECDSA_SIG *value = NULL;
    const BIGNUM *r = NULL, *s = NULL;
    uint8_t der[80];
    size_t der_length = sizeof der;
    const uint8_t *cursor = der;
    if (key == NULL || signature == NULL) goto done;
    md_context = EVP_MD_CTX_new();
    if (md_context == NULL || EVP_DigestSignInit(md_context, NULL, EVP_sha256(), NULL, (EVP_PKEY *)key) != 1)
        goto done;
    if (EVP_DigestSign(md_context, der, &der_length, sk_nonnull(message), message_length) != 1) goto done;
    value = d2i_ECDSA_SIG(NULL, &cursor, (long)der_length);
    if (value == NULL) goto done;
    ECDSA_SIG_get0(value, &r, &s);
    if (BN_bn2binpad(r, signature, 32) != 32 || BN_bn2binpad(s, signature + 32, 32) != 32) goto done;
    status = 1;
done:
    ECDSA_SIG_free(value);
    EVP_MD_CTX_free(md_context);
    ERR_clear_error();
    return status;
}

#endif
