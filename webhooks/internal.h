/*
 * Webhooks internals shared by its files. The struct is immutable after start except
 * `stopping`; the key and the policy are read by every thread without a lock.
 */
#ifndef EVD_WEBHOOKS_INTERNAL_H
#define EVD_WEBHOOKS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "webhooks/policy.h"
#include "webhooks/seal.h"
#include "webhooks/webhooks.h"

struct evd_webhooks {
    struct evd_webhooks_options opts; /* secret_key is cleared: the key lives below */
    struct evd_webhook_policy *policy;
    unsigned char key[EVD_WEBHOOK_KEY_LEN];
    bool has_key;
    char owner[128]; /* lease owner: host:pid:random */
    atomic_bool stopping;
    int wake_pipe[2]; /* written once at stop; wakes every poll */
    pthread_t *threads;
    size_t nthreads;
};

/* The delivery thread body (webhooks/deliver.c); `arg` is the struct evd_webhooks. */
void *evd_webhooks_worker_main(void *arg);

#endif
