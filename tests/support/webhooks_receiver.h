/*
 * Test helper: a webhook receiver on 127.0.0.1 (libmicrohttpd, its own threads) that
 * records every request (path, evald's headers, body) and answers 204, or a chosen
 * failure status for the next N requests (or until told otherwise), or no answer at all.
 * Thread-safe: the test thread reads while the server threads record, under one mutex.
 */
#ifndef EVD_TESTS_WEBHOOKS_RECEIVER_H
#define EVD_TESTS_WEBHOOKS_RECEIVER_H

#include <stdbool.h>
#include <stddef.h>

/* One recorded request; owned by the caller after evd_t_receiver_get. */
struct evd_t_hook {
    char method[16];
    char path[256];
    char content_type[128];
    char event_id[96];    /* X-Evald-Event-Id */
    char event_type[64];  /* X-Evald-Event-Type */
    char delivery_id[96]; /* X-Evald-Delivery-Id */
    char timestamp[32];   /* X-Evald-Timestamp */
    char signature[160];  /* X-Evald-Signature */
    char *body;           /* NUL-terminated, malloc'd */
    size_t len;
    int answered; /* the status the receiver answered; 0 while hanging */
};

struct evd_t_receiver;

/* Starts a receiver on 127.0.0.1:port (0 = a free port); NULL on failure. */
struct evd_t_receiver *evd_t_receiver_start(unsigned port);
unsigned evd_t_receiver_port(const struct evd_t_receiver *r);
/* The next `n` requests (n < 0: every one until called again) answer `status`;
 * n = 0 restores 204 for all. */
void evd_t_receiver_fail(struct evd_t_receiver *r, int n, int status);
/* While on, every request is recorded (answered = 0) and then left unanswered until
 * hanging is turned off or the receiver stops: a receiver that never answers. */
void evd_t_receiver_hang(struct evd_t_receiver *r, bool on);
/* Requests recorded so far, and those answered 2xx. */
size_t evd_t_receiver_count(struct evd_t_receiver *r);
size_t evd_t_receiver_acked(struct evd_t_receiver *r);
/* Waits up to timeout_ms until at least n requests were answered 2xx. */
bool evd_t_receiver_wait_acked(struct evd_t_receiver *r, size_t n, int timeout_ms);
/* Waits up to timeout_ms until at least n requests arrived. */
bool evd_t_receiver_wait_count(struct evd_t_receiver *r, size_t n, int timeout_ms);
/* Copies request i (0-based, arrival order); false when there is none. */
bool evd_t_receiver_get(struct evd_t_receiver *r, size_t i, struct evd_t_hook *out);
void evd_t_hook_free(struct evd_t_hook *h);
/* Stops the server and frees everything (NULL-safe). */
void evd_t_receiver_stop(struct evd_t_receiver *r);

/* Recomputes "t=<t>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>" from the parts of `h`
 * and compares it with its X-Evald-Signature; also checks X-Evald-Timestamp = t. */
bool evd_t_hook_signature_ok(const struct evd_t_hook *h, const char *secret);

#endif
