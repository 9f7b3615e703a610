// The OpenSSL 3 libcrypto calls SessionKit makes on Linux, as small functions Swift calls with plain buffers.
//
// Rules every function here keeps, so the Swift side never owns an OpenSSL object:
// - each function creates, uses and frees every OpenSSL object it touches, on every path (one `done:` label);
// - each clears the thread's OpenSSL error queue before returning, so a failure here never leaks into an
//   unrelated later call's error report;
// - lengths are checked here as well as in Swift, and private scalars live in secure-heap BIGNUMs that are
//   cleared when freed;
// - only OpenSSL 3 APIs (EVP_PKEY_fromdata, EVP_Digest{Sign,Verify}*, OSSL_PARAM_BLD), no RSA_* or EC_KEY_*,
//   except the P-256 signer at the end, which prepares signature nonces ahead (its comment says why).
// SwiftPM does not track this header as an input of the Swift files that import it: after editing it, touch
// Sources/SessionKit/Crypto/PlatformCrypto+OpenSSL.swift (scripts/mutants does) or the old code stays built.
// Status: 1 is success (or "the signature is valid"), 0 is "the signature is not valid", -1 is a failure to
// build a key or run the operation. Messages may be empty: a non-null pointer is substituted for OpenSSL.
#ifndef SESSIONKIT_CRYPTO_SHIM_H
#define SESSIONKIT_CRYPTO_SHIM_H

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>

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

/// How many signature nonces a P-256 signer keeps ready (see `sk_p256_signer`).
#define SK_P256_POOL_CAPACITY 16

/// A P-256 private key that signs ES256, with a small pool of signature nonces made ahead of time.
///
/// An ECDSA signature is two parts: the nonce point, r = x(k·G) and k⁻¹ for a random k (the costly part, a scalar
/// multiplication, which does not depend on the message), and s = k⁻¹(z + r·d), a few multiplications modulo n.
/// A DPoP proof goes with every request, so the first part is done ahead, off the request's path
/// (`sk_p256_signer_prepare`, called from SessionKit's idle thread), and a signature takes the next prepared pair
/// (`sk_p256_signer_sign`), falling back to a whole signature when none is ready. Each pair is used once: taken
/// out of the pool under the lock and cleared as it is freed, since a k used twice, or known, reveals the private
/// key. For the same reason the pool is emptied when the process id changes: a forked child must not sign with its
/// parent's nonces. The pool holds nothing the process does not already hold (the private key is beside it).
///
/// OpenSSL 3 offers a prepared nonce only through `ECDSA_sign_setup` and `ECDSA_do_sign_ex` on an `EC_KEY`,
/// deprecated since 3.0 but kept; they are the exception to this file's "no EC_KEY_*" rule. Threads share the
/// key read-only: preparing and signing never change it.
typedef struct {
    pthread_mutex_t lock;
    EC_KEY *key;
    pid_t owner;
    int count;
    BIGNUM *kinv[SK_P256_POOL_CAPACITY];
    BIGNUM *r[SK_P256_POOL_CAPACITY];
    int identifier_count;
    uint8_t identifiers[SK_P256_POOL_CAPACITY][16];
} sk_p256_signer;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/// Empties the pool, clearing each k⁻¹. Called with the lock held (or by the only owner, at free).
static inline void sk_p256_signer_drain(sk_p256_signer *signer) {
    for (int index = 0; index < signer->count; index++) {
        BN_clear_free(signer->kinv[index]);
        BN_clear_free(signer->r[index]);
        signer->kinv[index] = NULL;
        signer->r[index] = NULL;
    }
    signer->count = 0;
    OPENSSL_cleanse(signer->identifiers, sizeof signer->identifiers);
    signer->identifier_count = 0;
}

/// Frees a signer from `sk_p256_signer_new`: its prepared nonces are cleared, and OpenSSL clears the private
/// scalar as it frees the key. NULL is allowed.
static inline void sk_p256_signer_free(void *opaque) {
    sk_p256_signer *signer = (sk_p256_signer *)opaque;
    if (signer == NULL) return;
    sk_p256_signer_drain(signer);
    EC_KEY_free(signer->key);
    pthread_mutex_destroy(&signer->lock);
    OPENSSL_cleanse(signer, sizeof *signer);
    free(signer);
}

/// The P-256 key pair (scalar, x, y) as a signer with an empty pool; NULL when OpenSSL refuses it or the point is
/// not the scalar's. The caller frees it with `sk_p256_signer_free`.
static inline void *sk_p256_signer_new(const uint8_t *scalar, const uint8_t *x, const uint8_t *y) {
    sk_p256_signer *signer = NULL;
    BIGNUM *d = NULL, *px = NULL, *py = NULL;
    EC_POINT *point = NULL;
    EC_KEY *key = NULL;
    if (scalar == NULL || x == NULL || y == NULL) goto done;
    key = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
    d = BN_secure_new();
    px = BN_bin2bn(x, 32, NULL);
    py = BN_bin2bn(y, 32, NULL);
    if (key == NULL || d == NULL || px == NULL || py == NULL || BN_bin2bn(scalar, 32, d) == NULL) goto done;
    point = EC_POINT_new(EC_KEY_get0_group(key));
    if (point == NULL || EC_POINT_set_affine_coordinates(EC_KEY_get0_group(key), point, px, py, NULL) != 1
        || EC_KEY_set_private_key(key, d) != 1 || EC_KEY_set_public_key(key, point) != 1
        || EC_KEY_check_key(key) != 1)
        goto done;
    signer = calloc(1, sizeof *signer);
    if (signer == NULL) goto done;
    if (pthread_mutex_init(&signer->lock, NULL) != 0) {
        free(signer);
        signer = NULL;
        goto done;
    }
    signer->key = key;
    signer->owner = getpid();
    key = NULL;
done:
    EC_KEY_free(key);
    EC_POINT_free(point);
    BN_clear_free(d);
    BN_free(px);
    BN_free(py);
    ERR_clear_error();
    return signer;
}

/// Prepares nonces, and 16-byte random proof identifiers (DPoP's `jti`), until the pool holds `target` of each
/// (at most `SK_P256_POOL_CAPACITY`), each made outside the lock so a signature never waits for one, and at most
/// `at_most` nonces in this call. Returns how many nonces the pool holds, or -1 when OpenSSL fails.
static inline int sk_p256_signer_prepare(void *opaque, int target, int at_most) {
    sk_p256_signer *signer = (sk_p256_signer *)opaque;
    int count = -1;
    uint8_t identifiers[SK_P256_POOL_CAPACITY][16];
    if (signer == NULL) return -1;
    if (target > SK_P256_POOL_CAPACITY) target = SK_P256_POOL_CAPACITY;
    pthread_mutex_lock(&signer->lock);
    count = signer->owner == getpid() && signer->identifier_count < target ? target - signer->identifier_count : 0;
    pthread_mutex_unlock(&signer->lock);
    if (count > 0 && RAND_bytes(&identifiers[0][0], count * 16) == 1) {
        pthread_mutex_lock(&signer->lock);
        for (int index = 0; signer->owner == getpid() && signer->identifier_count < target && index < count; index++) {
            memcpy(signer->identifiers[signer->identifier_count], identifiers[index], 16);
            signer->identifier_count += 1;
        }
        pthread_mutex_unlock(&signer->lock);
        OPENSSL_cleanse(identifiers, sizeof identifiers);
    }
    for (;;) {
        BIGNUM *kinv = NULL, *r = NULL;
        pthread_mutex_lock(&signer->lock);
        if (signer->owner != getpid()) {
            sk_p256_signer_drain(signer);
            signer->owner = getpid();
        }
        count = signer->count;
        pthread_mutex_unlock(&signer->lock);
        if (count >= target || at_most <= 0) break;
        at_most -= 1;
        if (ECDSA_sign_setup(signer->key, NULL, &kinv, &r) != 1) {
            BN_clear_free(kinv);
            BN_clear_free(r);
            count = -1;
            break;
        }
        pthread_mutex_lock(&signer->lock);
        if (signer->owner == getpid() && signer->count < SK_P256_POOL_CAPACITY) {
            signer->kinv[signer->count] = kinv;
            signer->r[signer->count] = r;
            signer->count += 1;
            kinv = NULL;
            r = NULL;
        }
        pthread_mutex_unlock(&signer->lock);
        BN_clear_free(kinv);
        BN_clear_free(r);
    }
    ERR_clear_error();
    return count;
}

/// A 16-byte random identifier, from the pool when one is prepared (each taken once), else from RAND_bytes.
static inline int sk_p256_signer_identifier(void *opaque, uint8_t *identifier) {
    sk_p256_signer *signer = (sk_p256_signer *)opaque;
    int taken = 0;
    if (signer == NULL || identifier == NULL) return -1;
    pthread_mutex_lock(&signer->lock);
    if (signer->owner == getpid() && signer->identifier_count > 0) {
        signer->identifier_count -= 1;
        memcpy(identifier, signer->identifiers[signer->identifier_count], 16);
        OPENSSL_cleanse(signer->identifiers[signer->identifier_count], 16);
        taken = 1;
    }
    pthread_mutex_unlock(&signer->lock);
    if (taken) return 1;
    taken = RAND_bytes(identifier, 16) == 1 ? 1 : -1;
    ERR_clear_error();
    return taken;
}

/// An ES256 signature (RFC 7518 §3.4) over `message`: SHA-256, ECDSA with the next prepared nonce (or a fresh one
/// when the pool is empty), written to `signature` as r || s, 32 bytes each. `remaining`, when not NULL, is set to
/// how many prepared nonces are left. The hash is `SHA256_Init`/`Update`/`Final`, deprecated since 3.0 like the
/// `EC_KEY` calls here and kept, rather than `EVP_Digest(EVP_sha256())`, which looks SHA-256 up in the provider tables
/// on every call: this runs on every request, over a message that is public.
static inline int sk_p256_signer_sign(
    void *opaque, const uint8_t *message, size_t message_length, uint8_t *signature, int *remaining) {
    sk_p256_signer *signer = (sk_p256_signer *)opaque;
    int status = -1;
    uint8_t digest[32];
    SHA256_CTX hashing;
    BIGNUM *kinv = NULL, *r = NULL;
    ECDSA_SIG *value = NULL;
    const BIGNUM *sig_r = NULL, *sig_s = NULL;
    if (signer == NULL || signature == NULL) goto done;
    if (SHA256_Init(&hashing) != 1 || SHA256_Update(&hashing, sk_nonnull(message), message_length) != 1
        || SHA256_Final(digest, &hashing) != 1)
        goto done;
    pthread_mutex_lock(&signer->lock);
    if (signer->owner != getpid()) {
        sk_p256_signer_drain(signer);
        signer->owner = getpid();
    }
    if (signer->count > 0) {
        signer->count -= 1;
        kinv = signer->kinv[signer->count];
        r = signer->r[signer->count];
        signer->kinv[signer->count] = NULL;
        signer->r[signer->count] = NULL;
    }
    if (remaining != NULL) *remaining = signer->count;
    pthread_mutex_unlock(&signer->lock);
    // The prepared pair, when there is one, is used here once and cleared below whatever happens.
    value = kinv != NULL ? ECDSA_do_sign_ex(digest, sizeof digest, kinv, r, signer->key)
                         : ECDSA_do_sign(digest, sizeof digest, signer->key);
    if (value == NULL && kinv != NULL) value = ECDSA_do_sign(digest, sizeof digest, signer->key);
    if (value == NULL) goto done;
    ECDSA_SIG_get0(value, &sig_r, &sig_s);
    if (BN_bn2binpad(sig_r, signature, 32) != 32 || BN_bn2binpad(sig_s, signature + 32, 32) != 32) goto done;
    status = 1;
done:
    BN_clear_free(kinv);
    BN_clear_free(r);
    ECDSA_SIG_free(value);
    ERR_clear_error();
    return status;
}

#pragma GCC diagnostic pop

/// Puts the calling thread in the SCHED_IDLE class: it runs only on a core nothing else wants, and is preempted as
/// soon as other work wakes. For the thread that prepares nonces, whose work is never urgent (a signature without a
/// prepared nonce is only slower). Lowering one's own priority needs no privilege. Returns 0, or an errno.
#ifndef SCHED_IDLE
#define SCHED_IDLE 5 /* Linux's number for it; glibc names it only under _GNU_SOURCE */
#endif
static inline int sk_thread_run_when_idle(void) {
    struct sched_param parameters;
    memset(&parameters, 0, sizeof parameters);
    return pthread_setschedparam(pthread_self(), SCHED_IDLE, &parameters);
}

#endif
