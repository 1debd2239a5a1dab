/*
 * The iii adapter's connection thread against a scripted server written here in C over
 * loopback TCP: the upgrade, masked frames, the registration sequence, pings and pongs,
 * invocations answered through evd_function_call (eval::ui-content needs no database),
 * bindings acknowledged or refused, calls to engine functions, reconnection with
 * reattach and a repeated at-least-once call, the idle timeout and the Close on stop.
 * The test thread plays the engine; the adapter runs its own threads.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "adapter/internal.h"
#include "common/log.h"
#include "handlers/api.h"
#include "handlers/functions.h"
#include "tests/support/testutil.h"

/* ---- a scripted engine ----------------------------------------------------------------- */

struct srv {
    int lfd;
    unsigned port;
    int fd;
};

static void srv_listen(struct srv *s)
{
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(s->lfd, 4), 0);
    socklen_t sl = sizeof(sa);
    getsockname(s->lfd, (struct sockaddr *)&sa, &sl);
    s->port = ntohs(sa.sin_port);
    s->fd = -1;
}

static void set_timeout(int fd, int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* Accepts the next connection and answers its upgrade. */
static void srv_accept(struct srv *s)
{
    set_timeout(s->lfd, 10000);
    s->fd = accept(s->lfd, NULL, NULL);
    ck_assert_msg(s->fd >= 0, "the adapter did not connect");
    set_timeout(s->fd, 5000);
    char req[4096];
    size_t n = 0;
    while (n < sizeof(req) - 1) {
        ssize_t r = recv(s->fd, req + n, sizeof(req) - 1 - n, 0);
        ck_assert(r > 0);
        n += (size_t)r;
        req[n] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    ck_assert(strncmp(req, "GET /engine HTTP/1.1\r\n", 22) == 0);
    ck_assert(strstr(req, "\r\nUpgrade: websocket\r\n"));
    ck_assert(strstr(req, "\r\nSec-WebSocket-Version: 13\r\n"));
    const char *k = strstr(req, "Sec-WebSocket-Key: ");
    ck_assert_ptr_nonnull(k);
    char key[25];
    memcpy(key, k + 19, 24);
    key[24] = '\0';
    char accept_[29];
    evd_ws_accept_for(key, accept_);
    char resp[256];
    int len = snprintf(resp, sizeof(resp),
                       "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                       "Connection: upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                       accept_);
    ck_assert_int_eq(send(s->fd, resp, (size_t)len, MSG_NOSIGNAL), len);
}

static void recv_all(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        ck_assert_msg(r > 0, "the adapter sent no frame in time");
        got += (size_t)r;
    }
}

/* Reads one client frame; returns a malloc'd, NUL-terminated payload. */
static char *srv_frame(struct srv *s, int *opcode, size_t *len)
{
    uint8_t h[14];
    recv_all(s->fd, h, 2);
    ck_assert_msg(h[1] & 0x80, "client frames are masked");
    ck_assert(h[0] & 0x80); /* the adapter never fragments */
    *opcode = h[0] & 0x0f;
    uint64_t n = h[1] & 0x7f;
    if (n == 126) {
        recv_all(s->fd, h + 2, 2);
        n = ((uint64_t)h[2] << 8) | h[3];
    } else if (n == 127) {
        recv_all(s->fd, h + 2, 8);
        n = 0;
        for (int i = 0; i < 8; i++)
            n = (n << 8) | h[2 + i];
    }
    uint8_t mask[4];
    recv_all(s->fd, mask, 4);
    char *p = malloc((size_t)n + 1);
    recv_all(s->fd, (uint8_t *)p, (size_t)n);
    for (size_t i = 0; i < n; i++)
        p[i] ^= (char)mask[i & 3];
    p[n] = '\0';
    *len = (size_t)n;
    return p;
}

/* Reads frames until a text message; control frames are returned through *opcode. */
static json_t *srv_json(struct srv *s)
{
    for (;;) {
        int op;
        size_t n;
        char *p = srv_frame(s, &op, &n);
        if (op == EVD_WS_OP_TEXT) {
            json_t *m = json_loads(p, 0, NULL);
            ck_assert_msg(m != NULL, "undecodable frame %s", p);
            free(p);
            return m;
        }
        free(p);
        ck_assert_msg(op == EVD_WS_OP_PING, "unexpected opcode %d", op); /* pings may interleave */
    }
}

/* Reads JSON messages until one of `type` (and function_id, when given) arrives. */
static json_t *srv_expect(struct srv *s, const char *type, const char *function_id)
{
    for (int i = 0; i < 100; i++) {
        json_t *m = srv_json(s);
        const char *t = json_string_value(json_object_get(m, "type"));
        const char *f = json_string_value(json_object_get(m, "function_id"));
        if (strcmp(t, type) == 0 && (function_id == NULL || (f && strcmp(f, function_id) == 0)))
            return m;
        json_decref(m);
    }
    ck_abort_msg("no %s arrived", type);
    return NULL;
}

static void srv_send_frame(struct srv *s, int opcode, const void *data, size_t len)
{
    uint8_t h[4] = {(uint8_t)(0x80 | opcode)};
    size_t hl = 2;
    if (len <= 125) {
        h[1] = (uint8_t)len;
    } else {
        h[1] = 126;
        h[2] = (uint8_t)(len >> 8);
        h[3] = (uint8_t)len;
        hl = 4;
    }
    ck_assert_int_eq(send(s->fd, h, hl, MSG_NOSIGNAL), (ssize_t)hl);
    if (len)
        ck_assert_int_eq(send(s->fd, data, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void srv_send(struct srv *s, json_t *m)
{
    char *t = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    srv_send_frame(s, EVD_WS_OP_TEXT, t, strlen(t));
    free(t);
}

static void srv_drop(struct srv *s)
{
    close(s->fd);
    s->fd = -1;
}

/* Reads the announcement of a fresh session and returns how many functions it named. */
static int srv_registration(struct srv *s, const char *previous_worker)
{
    json_t *m = srv_json(s);
    if (previous_worker != NULL) {
        ck_assert_str_eq(json_string_value(json_object_get(m, "type")), "reattach");
        ck_assert_str_eq(json_string_value(json_object_get(m, "previous_worker_id")),
                         previous_worker);
        json_decref(m);
        m = srv_json(s);
    }
    /* engine::workers::register comes before any registration. */
    ck_assert_str_eq(json_string_value(json_object_get(m, "type")), "invokefunction");
    ck_assert_str_eq(json_string_value(json_object_get(m, "function_id")),
                     "engine::workers::register");
    json_t *data = json_object_get(m, "data");
    ck_assert_str_eq(json_string_value(json_object_get(data, "runtime")), "c");
    ck_assert(json_is_integer(json_object_get(data, "pid")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(m, "action"), "type")),
                     "void");
    json_decref(m);
    m = srv_json(s);
    ck_assert_str_eq(json_string_value(json_object_get(m, "type")), "registertriggertype");
    ck_assert_str_eq(json_string_value(json_object_get(m, "id")), "eval::completed");
    ck_assert(json_is_string(json_object_get(m, "description")));
    json_decref(m);
    /* evald's own trigger type follows, with both of its schemas. */
    m = srv_json(s);
    ck_assert_str_eq(json_string_value(json_object_get(m, "type")), "registertriggertype");
    ck_assert_str_eq(json_string_value(json_object_get(m, "id")), "eval::experiment::completed");
    ck_assert(json_is_string(json_object_get(m, "description")));
    json_t *config = json_object_get(m, "trigger_request_format");
    ck_assert(
        json_is_object(json_object_get(json_object_get(config, "properties"), "experiment_id")));
    json_t *event = json_object_get(m, "call_request_format");
    ck_assert_uint_eq(json_array_size(json_object_get(event, "required")), 4);
    ck_assert(json_is_object(json_object_get(json_object_get(event, "properties"), "verdicts")));
    json_decref(m);
    int n = json_array_size(json_object_get(evd_functions_catalogue(), "functions"));
    for (int i = 0; i < n; i++) {
        m = srv_json(s);
        ck_assert_str_eq(json_string_value(json_object_get(m, "type")), "registerfunction");
        ck_assert(json_is_string(json_object_get(m, "description")));
        ck_assert(json_is_object(json_object_get(m, "request_format")));
        json_decref(m);
    }
    return n;
}

/* ---- the adapter under test ------------------------------------------------------------ */

static struct evd_ctx ctx; /* eval::ui-content needs nothing from it */

static struct evd_iii *start_adapter(const struct srv *s, long ping_ms, long idle_ms)
{
    char url[64];
    snprintf(url, sizeof(url), "ws://127.0.0.1:%u/engine", s->port);
    struct evd_iii_options o = {
        .url = url,
        .conninfo = "host=127.0.0.1 port=1 connect_timeout=1", /* delivery never connects */
        .handler_threads = 2,
        .ping_interval_ms = ping_ms,
        .idle_timeout_ms = idle_ms,
        .backoff_initial_ms = 50,
        .backoff_max_ms = 200,
    };
    struct evd_err err = {0};
    struct evd_iii *a = evd_iii_new(&o, &err);
    ck_assert_msg(a != NULL, "%s", err.msg);
    ck_assert_int_eq(evd_iii_start(a, &ctx, &err), EVD_OK);
    return a;
}

struct call {
    struct evd_iii *a;
    const char *fid;
    bool at_least_once;
    json_t *result;
    struct evd_err err;
    pthread_t t;
};

static void *call_main(void *p)
{
    struct call *c = p;
    json_t *payload = json_pack("{s:i}", "q", 1);
    c->result = evd_iii_remote_call(c->a, c->fid, payload, 5000, NULL, c->at_least_once, &c->err);
    json_decref(payload);
    return NULL;
}

static void call_start(struct call *c, struct evd_iii *a, const char *fid, bool at_least_once)
{
    memset(c, 0, sizeof(*c));
    c->a = a;
    c->fid = fid;
    c->at_least_once = at_least_once;
    ck_assert_int_eq(pthread_create(&c->t, NULL, call_main, c), 0);
}

/* Reads the call's invokefunction and checks it; returns its invocation id (static). */
static const char *srv_call(struct srv *s, const char *fid)
{
    static char id[64];
    json_t *m = srv_expect(s, "invokefunction", fid);
    const char *iid = json_string_value(json_object_get(m, "invocation_id"));
    ck_assert_ptr_nonnull(iid);
    ck_assert_uint_eq(strlen(iid), 36);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(m, "data"), "q")), 1);
    snprintf(id, sizeof(id), "%s", iid);
    json_decref(m);
    return id;
}

static size_t nbindings(struct evd_iii *a)
{
    pthread_mutex_lock(&a->mu);
    size_t n = a->nbindings;
    pthread_mutex_unlock(&a->mu);
    return n;
}

static json_t *invoke(struct srv *s, const char *id, const char *fid, json_t *data)
{
    srv_send(s, json_pack("{s:s, s:s, s:s, s:o, s:s}", "type", "invokefunction", "invocation_id",
                          id, "function_id", fid, "data", data, "traceparent", "00-ab-cd-01"));
    json_t *m = srv_expect(s, "invocationresult", NULL);
    ck_assert_str_eq(json_string_value(json_object_get(m, "invocation_id")), id);
    ck_assert_str_eq(json_string_value(json_object_get(m, "function_id")), fid);
    return m;
}

static json_t *bind_trigger(struct srv *s, const char *id, const char *type, json_t *config)
{
    srv_send(s, json_pack("{s:s, s:s, s:s, s:s, s:o, s:{s:i}}", "type", "registertrigger", "id", id,
                          "trigger_type", type, "function_id", "sink::fn", "config", config,
                          "metadata", "k", 1));
    json_t *m = srv_expect(s, "triggerregistrationresult", NULL);
    ck_assert_str_eq(json_string_value(json_object_get(m, "id")), id);
    ck_assert_str_eq(json_string_value(json_object_get(m, "trigger_type")), type);
    ck_assert_str_eq(json_string_value(json_object_get(m, "function_id")), "sink::fn");
    return m;
}

START_TEST(a_session_registers_answers_and_survives_a_reconnect)
{
    struct srv s;
    srv_listen(&s);
    struct evd_iii *a = start_adapter(&s, 20000, 60000);
    srv_accept(&s);
    ck_assert_int_ge(srv_registration(&s, NULL), 12);
    srv_send(&s, json_pack("{s:s, s:s, s:s}", "type", "workerregistered", "worker_id", "w-1",
                           "reattach_token", "t-1"));

    /* A control ping is answered with the same payload; a JSON ping with a JSON pong. */
    srv_send_frame(&s, EVD_WS_OP_PING, "abc", 3);
    int op;
    size_t n;
    char *p = srv_frame(&s, &op, &n);
    ck_assert_int_eq(op, EVD_WS_OP_PONG);
    ck_assert_str_eq(p, "abc");
    free(p);
    srv_send(&s, json_pack("{s:s}", "type", "ping"));
    json_decref(srv_expect(&s, "pong", NULL));

    /* Invocations are answered through evd_function_call, exactly once each. */
    json_t *m = invoke(&s, "0b7c5a58-7a3e-4d55-9a8a-1c2d3e4f5a6b", "eval::ui-content",
                       json_pack("{s:s, s:s}", "path", "index.html", "_caller_worker_id", "w-9"));
    json_t *result = json_object_get(m, "result");
    ck_assert(strstr(json_string_value(json_object_get(result, "content_type")), "text/html"));
    ck_assert_ptr_null(json_object_get(m, "error"));
    ck_assert_str_eq(json_string_value(json_object_get(m, "traceparent")), "00-ab-cd-01");
    json_decref(m);
    m = invoke(&s, "1b7c5a58-7a3e-4d55-9a8a-1c2d3e4f5a6b", "eval::ui-content",
               json_pack("{s:i}", "path", 5));
    json_t *error = json_object_get(m, "error");
    ck_assert_str_eq(json_string_value(json_object_get(error, "code")), "invocation_failed");
    ck_assert_str_eq(json_string_value(json_object_get(error, "message")),
                     "invalid request: path must be a string");
    json_decref(m);
    m = invoke(&s, "2b7c5a58-7a3e-4d55-9a8a-1c2d3e4f5a6b", "other::fn", json_object());
    error = json_object_get(m, "error");
    ck_assert_str_eq(json_string_value(json_object_get(error, "code")), "function_not_found");
    json_decref(m);
    /* Fire-and-forget: no answer, so the next message is the pong of the next ping. */
    srv_send(&s, json_pack("{s:s, s:s, s:{s:s}}", "type", "invokefunction", "function_id",
                           "eval::ui-content", "data", "path", "index.html"));
    srv_send(&s, json_pack("{s:s}", "type", "ping"));
    m = srv_json(&s);
    ck_assert_str_eq(json_string_value(json_object_get(m, "type")), "pong");
    json_decref(m);

    /* Bindings of eval::completed are validated, acknowledged and kept. */
    m = bind_trigger(&s, "b-1", "eval::completed", json_pack("{s:s}", "evaluation_id", "eval_1"));
    ck_assert_ptr_null(json_object_get(m, "error"));
    json_decref(m);
    m = bind_trigger(&s, "b-0", "eval::completed", json_null());
    ck_assert_ptr_null(json_object_get(m, "error"));
    json_decref(m);
    ck_assert_uint_eq(nbindings(a), 2);
    m = bind_trigger(&s, "b-2", "eval::completed", json_pack("{s:i}", "bad", 1));
    error = json_object_get(m, "error");
    ck_assert_str_eq(json_string_value(json_object_get(error, "code")),
                     "trigger_registration_failed");
    ck_assert(strncmp(json_string_value(json_object_get(error, "message")),
                      "invalid eval::completed config: ", 32) == 0);
    json_decref(m);
    /* So are bindings of eval::experiment::completed, with their own config. */
    m = bind_trigger(&s, "x-1", "eval::experiment::completed",
                     json_pack("{s:s}", "experiment_id", "exp_1"));
    ck_assert_ptr_null(json_object_get(m, "error"));
    json_decref(m);
    ck_assert_uint_eq(nbindings(a), 3);
    m = bind_trigger(&s, "x-2", "eval::experiment::completed",
                     json_pack("{s:s}", "evaluation_id", "eval_1"));
    error = json_object_get(m, "error");
    ck_assert_str_eq(json_string_value(json_object_get(error, "code")),
                     "trigger_registration_failed");
    ck_assert_str_eq(json_string_value(json_object_get(error, "message")),
                     "invalid eval::experiment::completed config: unknown field `evaluation_id`, "
                     "expected `experiment_id`");
    json_decref(m);
    srv_send(&s, json_pack("{s:s, s:s, s:s}", "type", "unregistertrigger", "id", "x-1",
                           "trigger_type", "eval::experiment::completed"));
    m = bind_trigger(&s, "b-3", "other::type", json_object());
    error = json_object_get(m, "error");
    ck_assert_str_eq(json_string_value(json_object_get(error, "code")), "trigger_type_not_found");
    json_decref(m);
    ck_assert_uint_eq(nbindings(a), 2);
    srv_send(&s, json_pack("{s:s, s:s, s:s}", "type", "unregistertrigger", "id", "b-1",
                           "trigger_type", "eval::completed"));
    srv_send(&s, json_pack("{s:s}", "type", "ping"));
    json_decref(srv_expect(&s, "pong", NULL)); /* handled in order */
    ck_assert_uint_eq(nbindings(a), 1);

    /* Calls to engine functions: a result, an error, a not-found retried early on. */
    struct call c;
    call_start(&c, a, "x::y", false);
    const char *id = srv_call(&s, "x::y");
    srv_send(&s, json_pack("{s:s, s:s, s:s, s:{s:b}}", "type", "invocationresult", "invocation_id",
                           id, "function_id", "x::y", "result", "ok", 1));
    pthread_join(c.t, NULL);
    ck_assert_msg(c.result != NULL, "%s", c.err.msg);
    ck_assert(json_is_true(json_object_get(c.result, "ok")));
    json_decref(c.result);

    call_start(&c, a, "x::y", true);
    id = srv_call(&s, "x::y");
    srv_send(&s, json_pack("{s:s, s:s, s:s, s:{s:s, s:s}}", "type", "invocationresult",
                           "invocation_id", id, "function_id", "x::y", "error", "code",
                           "invocation_failed", "message", "boom"));
    pthread_join(c.t, NULL);
    ck_assert_ptr_null(c.result);
    ck_assert_int_eq(c.err.code, EVD_EUPSTREAM);
    ck_assert(strstr(c.err.msg, "boom") != NULL);

    call_start(&c, a, "x::y", false);
    id = srv_call(&s, "x::y");
    srv_send(&s, json_pack("{s:s, s:s, s:s, s:{s:s, s:s}}", "type", "invocationresult",
                           "invocation_id", id, "function_id", "x::y", "error", "code",
                           "function_not_found", "message", "not yet"));
    const char *again = srv_call(&s, "x::y"); /* the callee may not be back yet */
    srv_send(&s, json_pack("{s:s, s:s, s:s, s:i}", "type", "invocationresult", "invocation_id",
                           again, "function_id", "x::y", "result", 7));
    pthread_join(c.t, NULL);
    ck_assert_msg(c.result != NULL, "%s", c.err.msg);
    ck_assert_int_eq(json_integer_value(c.result), 7);
    json_decref(c.result);

    /* The engine goes away mid-call: the adapter reconnects, reattaches, announces
     * everything again, and repeats the at-least-once call. */
    call_start(&c, a, "x::y", true);
    srv_call(&s, "x::y");
    srv_drop(&s);
    srv_accept(&s);
    srv_registration(&s, "w-1");
    ck_assert_uint_eq(nbindings(a), 0); /* the engine replays them */
    id = srv_call(&s, "x::y");
    srv_send(&s, json_pack("{s:s, s:s, s:s, s:s}", "type", "invocationresult", "invocation_id", id,
                           "function_id", "x::y", "result", "again"));
    pthread_join(c.t, NULL);
    ck_assert_msg(c.result != NULL, "%s", c.err.msg);
    ck_assert_str_eq(json_string_value(c.result), "again");
    json_decref(c.result);

    /* A call that may not be repeated fails when the connection is lost. */
    call_start(&c, a, "x::y", false);
    srv_call(&s, "x::y");
    srv_drop(&s);
    pthread_join(c.t, NULL);
    ck_assert_ptr_null(c.result);
    ck_assert_int_eq(c.err.code, EVD_EUPSTREAM);
    ck_assert(strstr(c.err.msg, "connection was lost") != NULL);
    srv_accept(&s);
    srv_registration(&s, "w-1");

    /* Stop: a Close frame (1001), answered, then the threads end. */
    int64_t t0 = evd_mono_ms();
    evd_iii_signal_stop(a);
    for (;;) {
        p = srv_frame(&s, &op, &n);
        if (op == EVD_WS_OP_CLOSE)
            break;
        free(p);
    }
    ck_assert_uint_ge(n, 2);
    ck_assert_int_eq(((uint8_t)p[0] << 8) | (uint8_t)p[1], 1001);
    ck_assert_str_eq(p + 2, "evald is shutting down");
    free(p);
    srv_send_frame(&s, EVD_WS_OP_CLOSE, "\x03\xe9", 2);
    evd_iii_stop(a);
    ck_assert(evd_mono_ms() - t0 < 3000);
    ck_assert(!evd_iii_connected(a));
    evd_iii_free(a);
    close(s.fd);
    close(s.lfd);
}
END_TEST

START_TEST(a_silent_engine_is_pinged_then_left)
{
    struct srv s;
    srv_listen(&s);
    struct evd_iii *a = start_adapter(&s, 100, 600);
    srv_accept(&s);
    srv_registration(&s, NULL);
    int pings = 0;
    int64_t t0 = evd_mono_ms();
    for (;;) {
        uint8_t h[2];
        ssize_t r = recv(s.fd, h, 2, 0);
        if (r <= 0)
            break; /* the adapter gave up on the silent engine */
        ck_assert_int_eq(r, 2);
        uint8_t rest[200];
        recv_all(s.fd, rest, 4 + (h[1] & 0x7f));
        if ((h[0] & 0x0f) == EVD_WS_OP_PING)
            pings++;
    }
    int64_t took = evd_mono_ms() - t0;
    ck_assert_int_ge(pings, 3);
    ck_assert_msg(took >= 450 && took < 3000, "left after %lld ms", (long long)took);
    close(s.fd);
    srv_accept(&s); /* and comes back */
    srv_registration(&s, NULL);
    evd_iii_stop(a);
    evd_iii_free(a);
    close(s.fd);
    close(s.lfd);
}
END_TEST

START_TEST(an_engine_that_refuses_the_upgrade_is_retried)
{
    struct srv s;
    srv_listen(&s);
    struct evd_iii *a = start_adapter(&s, 20000, 60000);
    set_timeout(s.lfd, 10000);
    int64_t t0 = evd_mono_ms();
    for (int i = 0; i < 3; i++) {
        int fd = accept(s.lfd, NULL, NULL);
        ck_assert(fd >= 0);
        set_timeout(fd, 5000);
        char buf[2048];
        ck_assert(recv(fd, buf, sizeof(buf), 0) > 0);
        const char *no = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
        send(fd, no, strlen(no), MSG_NOSIGNAL);
        close(fd);
    }
    /* Backoff 50 ms, 100 ms, 200 ms (±30 %) between the attempts. */
    ck_assert(evd_mono_ms() - t0 >= 100);
    srv_accept(&s);
    srv_registration(&s, NULL);
    ck_assert(evd_iii_connected(a));
    evd_iii_stop(a);
    evd_iii_free(a);
    close(s.fd);
    close(s.lfd);
}
END_TEST

int main(void)
{
    evd_log_set_level(EVD_LOG_ERROR);
    json_object_seed(0);
    Suite *s = suite_create("adapter_conn");
    TCase *tc = tcase_create("conn");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_session_registers_answers_and_survives_a_reconnect);
    tcase_add_test(tc, a_silent_engine_is_pinged_then_left);
    tcase_add_test(tc, an_engine_that_refuses_the_upgrade_is_retried);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
