/*
 * Fuzz target: the messages of the iii engine that adapter/proto.c decodes once a text
 * frame is reassembled (evd_iii_on_message): invokefunction, invocationresult,
 * registertrigger (and its eval::completed config), unregistertrigger, workerregistered,
 * ping, errors. The input is one message, as the frame's payload.
 *
 * One adapter is made once, never started (no thread, no socket): it is marked connected
 * so that replies are encoded into its outbox, and one call waits for invocation id
 * "inv_1" so that a result has a waiter to reach. After each message the queued jobs,
 * bindings, outbox and waiter are reset, so that inputs do not depend on each other.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/internal.h"
#include "common/log.h"
#include "tests/fuzz/fuzz.h"

static struct evd_iii *adapter;

static void setup(void)
{
    evd_log_set_level(EVD_LOG_ERROR + 1);
    struct evd_iii_options o = {.url = "ws://127.0.0.1:9/", .conninfo = "dbname=fuzz"};
    struct evd_err err = {0};
    if ((adapter = evd_iii_new(&o, &err)) == NULL)
        abort();
    adapter->connected = true;
    adapter->generation = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (adapter == NULL)
        setup();
    struct evd_iii_waiter w;
    memset(&w, 0, sizeof(w));
    snprintf(w.id, sizeof(w.id), "inv_1");
    w.generation = 1;
    pthread_mutex_lock(&adapter->mu);
    w.next = adapter->waiters;
    adapter->waiters = &w;
    pthread_mutex_unlock(&adapter->mu);

    evd_iii_on_message(adapter, 1, (const char *)data, size);

    pthread_mutex_lock(&adapter->mu);
    adapter->waiters = w.next;
    evd_iii_bindings_clear_locked(adapter);
    adapter->out.len = 0;
    adapter->out_total = 0;
    pthread_mutex_unlock(&adapter->mu);
    if (w.done && w.result == NULL && w.code[0] == '\0')
        abort(); /* an answer is a result or an error */
    json_decref(w.result);
    evd_iii_jobs_clear(adapter);
    return 0;
}
