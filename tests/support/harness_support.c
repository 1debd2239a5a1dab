/*
 * See harness_support.h. The tool server runs libmicrohttpd with a thread per connection
 * and guards its counters with one mutex; payloads are deep-copied under it so that no
 * json_t is shared between threads.
 */
#include "tests/support/harness_support.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

static struct MHD_Daemon *tools_d;
static char tools_base[64];
static pthread_mutex_t tools_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *tool_paths[] = {"/add", "/echo", "/fail", "/slow"};
static int tool_calls[4];
static json_t *tool_last[4];

struct conn {
    struct evd_buf body;
};

static int path_index(const char *url)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(url, tool_paths[i]) == 0)
            return i;
    return -1;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(v);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
    (void)cls, (void)version;
    struct conn *cn = *con_cls;
    if (cn == NULL) {
        cn = calloc(1, sizeof(*cn));
        *con_cls = cn;
        return MHD_YES;
    }
    if (*upload_size > 0) {
        evd_buf_append(&cn->body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    int idx = path_index(url);
    if (strcmp(method, "POST") != 0 || idx < 0)
        return reply(c, 404, json_pack("{s:{s:s}}", "error", "message", "no such tool"));
    json_t *payload = json_loads(cn->body.data ? cn->body.data : "null", JSON_DECODE_ANY, NULL);
    pthread_mutex_lock(&tools_mu);
    tool_calls[idx]++;
    json_decref(tool_last[idx]);
    tool_last[idx] = json_deep_copy(payload); /* never share a json_t across threads */
    pthread_mutex_unlock(&tools_mu);
    json_t *out;
    unsigned int status = 200;
    switch (idx) {
    case 0:
        out = json_pack("{s:I}", "sum",
                        json_integer_value(json_object_get(payload, "a")) +
                            json_integer_value(json_object_get(payload, "b")));
        break;
    case 1:
        out = json_pack("{s:O}", "echo", payload ? payload : json_null());
        break;
    case 2:
        status = 500;
        out = json_pack("{s:{s:s}}", "error", "message", "tool exploded");
        break;
    default:
        sleep(3);
        out = json_pack("{s:b}", "ok", 1);
        break;
    }
    json_decref(payload);
    return reply(c, status, out);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct conn *cn = *con_cls;
    if (cn != NULL) {
        evd_buf_free(&cn->body);
        free(cn);
    }
    *con_cls = NULL;
}

bool hs_tools_start(void)
{
    tools_d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
        NULL, NULL, on_request, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, MHD_OPTION_END);
    if (tools_d == NULL)
        return false;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(tools_d, MHD_DAEMON_INFO_BIND_PORT);
    snprintf(tools_base, sizeof(tools_base), "http://127.0.0.1:%u", info->port);
    return true;
}

void hs_tools_stop(void)
{
    if (tools_d != NULL)
        MHD_stop_daemon(tools_d);
    tools_d = NULL;
    hs_tools_reset();
}

const char *hs_tools_base(void)
{
    return tools_base;
}

int hs_tools_calls(const char *path)
{
    int i = path_index(path), n;
    pthread_mutex_lock(&tools_mu);
    n = i >= 0 ? tool_calls[i] : -1;
    pthread_mutex_unlock(&tools_mu);
    return n;
}

json_t *hs_tools_last(const char *path)
{
    int i = path_index(path);
    json_t *v;
    pthread_mutex_lock(&tools_mu);
    v = i >= 0 ? json_deep_copy(tool_last[i]) : NULL;
    pthread_mutex_unlock(&tools_mu);
    return v;
}

void hs_tools_reset(void)
{
    pthread_mutex_lock(&tools_mu);
    for (int i = 0; i < 4; i++) {
        tool_calls[i] = 0;
        json_decref(tool_last[i]);
        tool_last[i] = NULL;
    }
    pthread_mutex_unlock(&tools_mu);
}
