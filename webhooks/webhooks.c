/*
 * Start and stop of the webhooks module: parse the allowlist and the key, start the
 * delivery threads (webhooks/deliver.c). Stop: set `stopping`, write the wake pipe
 * (every poll returns, every in-flight request aborts), join.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "webhooks/internal.h"

struct evd_webhooks *evd_webhooks_start(const struct evd_webhooks_options *opts,
                                        struct evd_err *err)
{
    struct evd_webhooks *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    w->opts = *opts;
    w->opts.secret_key = NULL;
    w->wake_pipe[0] = w->wake_pipe[1] = -1;
    if (w->opts.backoff_ms <= 0)
        w->opts.backoff_ms = 5000;
    if (w->opts.poll_ms <= 0)
        w->opts.poll_ms = 2000;
    if (evd_webhook_policy_parse(opts->allow_hosts, &w->policy, err) != EVD_OK)
        goto fail;
    if (opts->secret_key != NULL && opts->secret_key[0] != '\0') {
        if (!evd_webhook_key_parse(opts->secret_key, w->key)) {
            evd_err_set(err, EVD_EINVAL,
                        "EVALD_SECRET_KEY must be 64 hexadecimal characters (32 bytes)");
            goto fail;
        }
        w->has_key = true;
    }
    if (pipe(w->wake_pipe) != 0) {
        evd_err_set(err, EVD_EINTERNAL, "could not create the wake pipe");
        goto fail;
    }
    char host[64] = "host", rnd[48];
    gethostname(host, sizeof(host) - 1);
    evd_new_id("", rnd, sizeof(rnd));
    snprintf(w->owner, sizeof(w->owner), "%s:%ld:%.8s", host, (long)getpid(), rnd);
    if (!w->has_key) {
        evd_log(EVD_LOG_INFO,
                "webhooks off: EVALD_SECRET_KEY is unset, so subscriptions cannot be created "
                "and this process delivers none",
                NULL);
        return w;
    }
    if (opts->workers > 0) {
        w->threads = calloc((size_t)opts->workers, sizeof(*w->threads));
        for (long i = 0; w->threads && i < opts->workers; i++)
            if (pthread_create(&w->threads[i], NULL, evd_webhooks_worker_main, w) == 0)
                w->nthreads++;
        if (w->nthreads == 0) {
            evd_err_set(err, EVD_EINTERNAL, "could not start the webhook delivery threads");
            goto fail;
        }
    }
    return w;
fail:
    evd_webhooks_stop(w);
    return NULL;
}

void evd_webhooks_signal_stop(struct evd_webhooks *w)
{
    if (w == NULL || atomic_exchange(&w->stopping, true) || w->wake_pipe[1] < 0)
        return;
    ssize_t n = write(w->wake_pipe[1], "x", 1);
    (void)n;
}

void evd_webhooks_stop(struct evd_webhooks *w)
{
    if (w == NULL)
        return;
    evd_webhooks_signal_stop(w);
    for (size_t i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    free(w->threads);
    if (w->wake_pipe[0] >= 0) {
        close(w->wake_pipe[0]);
        close(w->wake_pipe[1]);
    }
    evd_webhook_policy_free(w->policy);
    OPENSSL_cleanse(w->key, sizeof(w->key));
    free(w);
}
