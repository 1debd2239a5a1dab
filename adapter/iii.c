/*
 * Adapter lifecycle: options and defaults, thread start and the ordered stop (see
 * iii.h). The adapter object is freed only by evd_iii_free, after every thread that
 * could call it has been joined.
 */
#include "adapter/iii.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapter/internal.h"
#include "common/log.h"

#define DEFAULT_HANDLERS 4
#define MAX_HANDLERS 64

static long or_default(long v, long d)
{
    return v > 0 ? v : d;
}

static int make_pipe(int fds[2])
{
    if (pipe(fds) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
        fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    }
    return 0;
}

struct evd_iii *evd_iii_new(const struct evd_iii_options *opts, struct evd_err *err)
{
    struct evd_ws_url url;
    if (evd_ws_url_parse(opts->url, &url, err) != EVD_OK)
        return NULL;
    if (opts->conninfo == NULL) {
        evd_err_set(err, EVD_EINVAL, "the iii adapter needs the database URL");
        return NULL;
    }
    struct evd_iii *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        evd_err_set(err, EVD_ENOMEM, "out of memory");
        return NULL;
    }
    a->wake[0] = a->wake[1] = a->dwake[0] = a->dwake[1] = -1;
    a->url = url;
    a->opts = *opts;
    a->url_copy = strdup(opts->url);
    a->conninfo_copy = strdup(opts->conninfo);
    a->opts.url = a->url_copy;
    a->opts.conninfo = a->conninfo_copy;
    a->opts.handler_threads = (int)or_default(opts->handler_threads, DEFAULT_HANDLERS);
    if (a->opts.handler_threads > MAX_HANDLERS)
        a->opts.handler_threads = MAX_HANDLERS;
    a->opts.ping_interval_ms = or_default(opts->ping_interval_ms, 20000);
    a->opts.idle_timeout_ms = or_default(opts->idle_timeout_ms, 60000);
    a->opts.backoff_initial_ms = or_default(opts->backoff_initial_ms, 1000);
    a->opts.backoff_max_ms = or_default(opts->backoff_max_ms, 30000);
    a->opts.connect_timeout_ms = or_default(opts->connect_timeout_ms, 10000);
    a->opts.retention_ms = or_default(opts->retention_ms, 24L * 3600 * 1000);
    a->opts.deliver_poll_ms = or_default(opts->deliver_poll_ms, 2000);
    a->out.limit = EVD_III_MAX_OUTBOX;
    char host[64] = "host";
    gethostname(host, sizeof(host) - 1);
    /* Worker names are unique per namespace on 0.23 engines: one per process. */
    snprintf(a->worker_name, sizeof(a->worker_name), "evald:%s:%ld", host, (long)getpid());
    a->remote = (struct evd_engine_remote){
        .call = evd_iii_remote_call,
        .functions = evd_iii_remote_functions,
        .ctx = a,
    };
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    pthread_cond_init(&a->jobs_cv, NULL);
    if (a->url_copy == NULL || a->conninfo_copy == NULL || make_pipe(a->wake) != 0 ||
        make_pipe(a->dwake) != 0) {
        evd_err_set(err, EVD_ENOMEM, "could not set up the iii adapter");
        evd_iii_free(a);
        return NULL;
    }
    return a;
}

const struct evd_engine_remote *evd_iii_remote(struct evd_iii *a)
{
    return &a->remote;
}

enum evd_code evd_iii_start(struct evd_iii *a, struct evd_ctx *ctx, struct evd_err *err)
{
    a->ctx = ctx;
    a->handlers = calloc((size_t)a->opts.handler_threads, sizeof(*a->handlers));
    if (a->handlers == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    for (int i = 0; i < a->opts.handler_threads; i++)
        if (pthread_create(&a->handlers[a->nhandlers], NULL, evd_iii_handler_main, a) == 0)
            a->nhandlers++;
    if (a->nhandlers == 0 || pthread_create(&a->conn_thread, NULL, evd_iii_conn_main, a) != 0) {
        evd_iii_signal_stop(a);
        for (int i = 0; i < a->nhandlers; i++)
            pthread_join(a->handlers[i], NULL);
        a->nhandlers = 0;
        return evd_err_set(err, EVD_EINTERNAL, "could not start the iii adapter threads");
    }
    if (pthread_create(&a->deliver_thread, NULL, evd_iii_deliver_main, a) != 0) {
        evd_iii_signal_stop(a);
        pthread_join(a->conn_thread, NULL);
        for (int i = 0; i < a->nhandlers; i++)
            pthread_join(a->handlers[i], NULL);
        a->nhandlers = 0;
        return evd_err_set(err, EVD_EINTERNAL, "could not start the iii delivery thread");
    }
    a->started = true;
    evd_log(EVD_LOG_INFO, "iii adapter started", "url", a->opts.url, "worker", a->worker_name,
            NULL);
    return EVD_OK;
}

void evd_iii_signal_stop(struct evd_iii *a)
{
    if (a == NULL || atomic_exchange(&a->stopping, true))
        return;
    pthread_mutex_lock(&a->mu);
    pthread_cond_broadcast(&a->cv);
    pthread_cond_broadcast(&a->jobs_cv);
    pthread_mutex_unlock(&a->mu);
    evd_iii_wake(a->wake[1]);
    evd_iii_wake(a->dwake[1]);
}

void evd_iii_stop(struct evd_iii *a)
{
    if (a == NULL)
        return;
    evd_iii_signal_stop(a);
    if (!a->started)
        return;
    /* The connection thread waits (bounded) for the handlers to answer before its Close. */
    pthread_join(a->conn_thread, NULL);
    for (int i = 0; i < a->nhandlers; i++)
        pthread_join(a->handlers[i], NULL);
    pthread_join(a->deliver_thread, NULL);
    a->nhandlers = 0;
    a->started = false;
    evd_iii_jobs_clear(a);
}

void evd_iii_free(struct evd_iii *a)
{
    if (a == NULL)
        return;
    evd_iii_stop(a);
    pthread_mutex_lock(&a->mu);
    evd_iii_bindings_clear_locked(a);
    pthread_mutex_unlock(&a->mu);
    evd_buf_free(&a->out);
    free(a->handlers);
    for (int i = 0; i < 2; i++) {
        if (a->wake[i] >= 0)
            close(a->wake[i]);
        if (a->dwake[i] >= 0)
            close(a->dwake[i]);
    }
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    pthread_cond_destroy(&a->jobs_cv);
    free(a->url_copy);
    free(a->conninfo_copy);
    free(a);
}

bool evd_iii_connected(struct evd_iii *a)
{
    pthread_mutex_lock(&a->mu);
    bool c = a->connected;
    pthread_mutex_unlock(&a->mu);
    return c;
}
