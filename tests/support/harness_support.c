/*
 * See harness_support.h. The stub child is spawned with posix_spawn and stopped with
 * SIGTERM; the tool server runs libmicrohttpd with a thread per connection and guards its
 * counters with one mutex.
 */
#include "tests/support/harness_support.h"

#include <curl/curl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"

extern char **environ;

bool hs_stub_start(struct hs_stub *s, const char *key)
{
    const char *bin = getenv("EVALD_STUB_BIN");
    int pipefd[2];
    memset(s, 0, sizeof(*s));
    if (bin == NULL || access(bin, X_OK) != 0) {
        fprintf(stderr, "SKIPPED: evald-stub not found (EVALD_STUB_BIN=%s)\n", bin ? bin : "");
        return false;
    }
    if (pipe(pipefd) != 0)
        return false;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    posix_spawn_file_actions_addclose(&fa, pipefd[1]);
    char *argv[] = {(char *)bin, "--listen", "127.0.0.1:0", "--log-level", "warn", NULL};
    if (key != NULL)
        setenv("EVALD_STUB_REQUIRE_KEY", key, 1);
    else
        unsetenv("EVALD_STUB_REQUIRE_KEY");
    int rc = posix_spawn(&s->pid, bin, &fa, NULL, argv, environ);
    unsetenv("EVALD_STUB_REQUIRE_KEY");
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (rc != 0) {
        close(pipefd[0]);
        return false;
    }
    char line[256];
    size_t n = 0;
    while (n < sizeof(line) - 1) {
        ssize_t r = read(pipefd[0], line + n, 1);
        if (r <= 0 || line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
    close(pipefd[0]);
    json_t *ready = json_loads(line, 0, NULL);
    const char *listen = json_string_value(json_object_get(ready, "listen"));
    if (listen != NULL)
        snprintf(s->base, sizeof(s->base), "http://%s", listen);
    json_decref(ready);
    if (s->base[0] == '\0') {
        fprintf(stderr, "evald-stub did not report its address: %s\n", line);
        hs_stub_stop(s);
        return false;
    }
    return true;
}

void hs_stub_stop(struct hs_stub *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

static size_t collect(char *p, size_t sz, size_t nm, void *ud)
{
    return evd_buf_append(ud, p, sz * nm) == 0 ? sz * nm : 0;
}

long hs_http(const char *method, const char *url, const char *body, char **resp_body)
{
    CURL *c = curl_easy_init();
    struct evd_buf b = {0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    long status = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body != NULL)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (resp_body != NULL)
        *resp_body = b.data;
    else
        evd_buf_free(&b);
    return status;
}

long hs_stub_script(struct hs_stub *s, json_t *script)
{
    char url[128];
    char *text = json_dumps(script, JSON_COMPACT);
    snprintf(url, sizeof(url), "%s/_stub/script", s->base);
    char *resp = NULL;
    long st = hs_http("PUT", url, text, &resp);
    if (st != 200) {
        int ws = 0;
        pid_t w = waitpid(s->pid, &ws, WNOHANG);
        fprintf(stderr, "stub script refused (%ld): %s; stub %s (status %d)\n", st,
                resp ? resp : "", w == s->pid ? "exited" : "alive", ws);
    }
    free(resp);
    free(text);
    return st;
}

long hs_stub_reset(struct hs_stub *s)
{
    char url[128];
    snprintf(url, sizeof(url), "%s/_stub/reset", s->base);
    return hs_http("POST", url, "", NULL);
}

static json_t *get_json(const char *url)
{
    char *body = NULL;
    json_t *v = NULL;
    if (hs_http("GET", url, NULL, &body) == 200 && body != NULL)
        v = json_loads(body, 0, NULL);
    free(body);
    return v;
}

json_t *hs_stub_requests(struct hs_stub *s, int limit)
{
    char url[160];
    snprintf(url, sizeof(url), "%s/_stub/requests?limit=%d", s->base, limit);
    return get_json(url);
}

json_t *hs_stub_stats(struct hs_stub *s)
{
    char url[128];
    snprintf(url, sizeof(url), "%s/_stub/stats", s->base);
    return get_json(url);
}

/* ---- tool server ----------------------------------------------------------------------- */

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
