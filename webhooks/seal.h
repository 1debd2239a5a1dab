/*
 * Webhook cryptography: sealing a subscription's signing secret for storage
 * (AES-256-GCM under EVALD_SECRET_KEY, the subscription id as associated data) and
 * signing a delivery (X-Evald-Signature). Pure functions over caller buffers;
 * thread-safe (OpenSSL's RNG and ciphers are). Plain secrets returned to the caller
 * must be wiped with evd_webhook_secret_free.
 */
#ifndef EVD_WEBHOOKS_SEAL_H
#define EVD_WEBHOOKS_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVD_WEBHOOK_KEY_LEN 32
/* "t=<up to 20 digits>,v1=<64 hex>" and a NUL. */
#define EVD_WEBHOOK_SIG_MAX 96

/* Parses 64 hexadecimal characters into key; false when `hex` is anything else. */
bool evd_webhook_key_parse(const char *hex, unsigned char key[EVD_WEBHOOK_KEY_LEN]);

/*
 * Seals `secret` (len bytes) bound to `aad` (NUL-terminated). Returns malloc'd
 * "v1:<24 hex nonce>:<hex ciphertext>:<32 hex tag>", or NULL when out of memory or
 * the cipher failed. A fresh random nonce each call.
 */
char *evd_webhook_seal(const unsigned char key[EVD_WEBHOOK_KEY_LEN], const char *aad,
                       const char *secret, size_t len);

/*
 * Opens what evd_webhook_seal made with the same key and aad. Returns the malloc'd
 * secret (NUL-terminated, *len bytes), or NULL when the text is malformed, the key
 * differs or the data was altered. Release with evd_webhook_secret_free.
 */
char *evd_webhook_unseal(const unsigned char key[EVD_WEBHOOK_KEY_LEN], const char *aad,
                         const char *sealed, size_t *len);

/* Wipes and frees a secret from evd_webhook_unseal (NULL-safe). */
void evd_webhook_secret_free(char *secret, size_t len);

/* Writes "t=<t>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>" into out. Returns false
 * when out of memory or the MAC failed (out is then ""). */
bool evd_webhook_sign(const void *secret, size_t secret_len, int64_t t, const char *body,
                      size_t body_len, char out[EVD_WEBHOOK_SIG_MAX]);

#endif
