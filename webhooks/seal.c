/*
 * AES-256-GCM sealing of subscription secrets and HMAC-SHA256 delivery signatures;
 * see seal.h. Every buffer that held a plain secret is wiped before it is freed.
 */
#include "webhooks/seal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define NONCE_LEN 12
#define TAG_LEN 16
#define SEAL_PREFIX "v1:"

/* Decodes exactly n bytes from 2n hex characters; false on any other character. */
static bool unhex(const char *hex, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < n; i++) {
        int hi = evd_hex_value(hex[2 * i]), lo = hi < 0 ? -1 : evd_hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

bool evd_webhook_key_parse(const char *hex, unsigned char key[EVD_WEBHOOK_KEY_LEN])
{
    return hex != NULL && strlen(hex) == 2 * EVD_WEBHOOK_KEY_LEN &&
           unhex(hex, EVD_WEBHOOK_KEY_LEN, key);
}

char *evd_webhook_seal(const unsigned char key[EVD_WEBHOOK_KEY_LEN], const char *aad,
                       const char *secret, size_t len)
{
    unsigned char nonce[NONCE_LEN], tag[TAG_LEN];
    unsigned char *ct = malloc(len + 1);
    /* "v1:" nonce ":" ciphertext ":" tag */
    size_t outsz = strlen(SEAL_PREFIX) + 2 * NONCE_LEN + 1 + 2 * len + 1 + 2 * TAG_LEN + 1;
    char *out = malloc(outsz);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    bool ok = ct && out && ctx && RAND_bytes(nonce, NONCE_LEN) == 1;
    int n = 0, fin = 0;
    ok = ok && EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1 &&
         EVP_EncryptInit_ex(ctx, NULL, NULL, key, nonce) == 1 &&
         EVP_EncryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)) == 1 &&
         EVP_EncryptUpdate(ctx, ct, &n, (const unsigned char *)secret, (int)len) == 1 &&
         EVP_EncryptFinal_ex(ctx, ct + n, &fin) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) == 1;
    if (ok) {
        char *p = out;
        memcpy(p, SEAL_PREFIX, strlen(SEAL_PREFIX));
        p += strlen(SEAL_PREFIX);
        evd_hex_encode(nonce, NONCE_LEN, p);
        p += 2 * NONCE_LEN;
        *p++ = ':';
        evd_hex_encode(ct, (size_t)(n + fin), p);
        p += 2 * (size_t)(n + fin);
        *p++ = ':';
        evd_hex_encode(tag, TAG_LEN, p);
    } else {
        free(out);
        out = NULL;
    }
    EVP_CIPHER_CTX_free(ctx);
    free(ct);
    return out;
}

char *evd_webhook_unseal(const unsigned char key[EVD_WEBHOOK_KEY_LEN], const char *aad,
                         const char *sealed, size_t *len)
{
    *len = 0;
    if (sealed == NULL || strncmp(sealed, SEAL_PREFIX, strlen(SEAL_PREFIX)) != 0)
        return NULL;
    const char *nonce_hex = sealed + strlen(SEAL_PREFIX);
    const char *c1 = strchr(nonce_hex, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (c1 == NULL || c2 == NULL || (size_t)(c1 - nonce_hex) != 2 * NONCE_LEN ||
        strlen(c2 + 1) != 2 * TAG_LEN || (size_t)(c2 - c1 - 1) % 2 != 0)
        return NULL;
    size_t ctlen = (size_t)(c2 - c1 - 1) / 2;
    unsigned char nonce[NONCE_LEN], tag[TAG_LEN];
    unsigned char *ct = malloc(ctlen + 1);
    char *plain = malloc(ctlen + 1);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n = 0, fin = 0;
    bool ok = ct && plain && ctx && unhex(nonce_hex, NONCE_LEN, nonce) &&
              unhex(c1 + 1, ctlen, ct) && unhex(c2 + 1, TAG_LEN, tag);
    ok = ok && EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1 &&
         EVP_DecryptInit_ex(ctx, NULL, NULL, key, nonce) == 1 &&
         EVP_DecryptUpdate(ctx, NULL, &n, (const unsigned char *)aad, (int)strlen(aad)) == 1 &&
         EVP_DecryptUpdate(ctx, (unsigned char *)plain, &n, ct, (int)ctlen) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1 &&
         EVP_DecryptFinal_ex(ctx, (unsigned char *)plain + n, &fin) == 1;
    EVP_CIPHER_CTX_free(ctx);
    free(ct);
    if (!ok) {
        evd_webhook_secret_free(plain, ctlen + 1);
        return NULL;
    }
    *len = (size_t)(n + fin);
    plain[*len] = '\0';
    return plain;
}

void evd_webhook_secret_free(char *secret, size_t len)
{
    if (secret == NULL)
        return;
    OPENSSL_cleanse(secret, len);
    free(secret);
}

bool evd_webhook_sign(const void *secret, size_t secret_len, int64_t t, const char *body,
                      size_t body_len, char out[EVD_WEBHOOK_SIG_MAX])
{
    out[0] = '\0';
    char ts[24];
    int tlen = snprintf(ts, sizeof(ts), "%lld", (long long)t);
    /* The signed text is "<t>.<body>". */
    size_t mlen = (size_t)tlen + 1 + body_len;
    unsigned char *msg = malloc(mlen);
    if (msg == NULL)
        return false;
    memcpy(msg, ts, (size_t)tlen);
    msg[tlen] = '.';
    memcpy(msg + tlen + 1, body, body_len);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    bool ok = HMAC(EVP_sha256(), secret, (int)secret_len, msg, mlen, mac, &maclen) != NULL;
    free(msg);
    if (!ok || maclen != 32)
        return false;
    char hex[65];
    evd_hex_encode(mac, maclen, hex);
    snprintf(out, EVD_WEBHOOK_SIG_MAX, "t=%s,v1=%s", ts, hex);
    return true;
}
