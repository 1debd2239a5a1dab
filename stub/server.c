/*
 * The stub's HTTP server on libmicrohttpd, one thread per connection so that scripted
 * latency and stalls block only their own request. Routes the provider endpoints and
 * the /_stub control endpoints, keeps the statistics and the request log.
 *
 * DESIGN: one mutex (`lock`) guards the current script pointer and its reference count,
 * rule hit counters, every counter, the session table and the request log ring. It is
 * never held across I/O, a sleep or a call into libmicrohttpd; no other lock exists.
 * A request takes a script reference under the lock and drops it when it has answered,
 * so PUT /_stub/script never frees a script in use. Log entries are private deep copies,
 * so no json_t is shared between threads outside the lock.
 */
#include "stub/stub.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#include "stub/internal.h"

/* ---------------------------------------------------------------- statistics */

static void session_enter(struct stub_server *s, const char *key)
{
    size_t i;
    for (i = 0; i < s->nsessions; i++)
        if (strcmp(s->sessions[i].key, key) == 0)
            break;
    if (i == s->nsessions) {
        if (s->nsessions == s->capsessions) {
            size_t cap = s->capsessions ? s->capsessions * 2 : 16;
            struct session_count *p = realloc(s->sessions, cap * sizeof(*p));
            if (p == NULL)
                return;
            s->sessions = p;
            s->capsessions = cap;
        }
        s->sessions[i].key = strdup(key);
        if (s->sessions[i].key == NULL)
            return;
        s->sessions[i].n = 0;
        s->nsessions++;
    }
    s->sessions[i].n++;
    if (s->sessions[i].n > s->max_per_session)
        s->max_per_session = s->sessions[i].n;
    if (s->sessions[i].n < 2)
        return;
    s->overlaps++;
    size_t k = 0;
    while (k < s->noverlap && strcmp(s->overlap[k].key, key) != 0)
        k++;
    if (k == s->noverlap) {
        if (k == OVERLAPS_MAX)
            return;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(s->overlap[k].key, sizeof(s->overlap[k].key), "%s", key);
        s->overlap[k].max = 0;
        s->overlap[k].first_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
        s->noverlap++;
    }
    if (s->sessions[i].n > s->overlap[k].max)
        s->overlap[k].max = s->sessions[i].n;
}

static void session_leave(struct stub_server *s, const char *key)
{
    for (size_t i = 0; i < s->nsessions; i++) {
        if (strcmp(s->sessions[i].key, key) != 0)
            continue;
        if (--s->sessions[i].n == 0) {
            free(s->sessions[i].key);
            s->sessions[i] = s->sessions[--s->nsessions];
        }
        return;
    }
}

/* Records the answered status of a provider request (under the lock). */
static void note_status(struct stub_server *s, struct conn *cx, int status)
{
    cx->status = status;
    if (status > 0 && status < STATUS_MAX)
        s->by_status[status]++;
    if (cx->seq != 0) {
        struct log_slot *slot = &s->ring[cx->seq % LOG_RING];
        if (slot->seq == cx->seq)
            json_object_set_new(slot->entry, "status", json_integer(status));
    }
}

/* Records the rule that answered a provider request (under the lock). */
static void note_rule(struct stub_server *s, struct conn *cx, int rule)
{
    if (rule < 0 || cx->seq == 0)
        return;
    struct log_slot *slot = &s->ring[cx->seq % LOG_RING];
    if (slot->seq == cx->seq)
        json_object_set_new(slot->entry, "rule", json_integer(rule));
}

/* ---------------------------------------------------------------- request log */

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value)
{
    (void)kind;
    json_t *headers = cls;
    char name[128];
    size_t n = strlen(key);
    if (n >= sizeof(name))
        return MHD_YES;
    for (size_t i = 0; i <= n; i++)
        name[i] = (char)((key[i] >= 'A' && key[i] <= 'Z') ? key[i] + 32 : key[i]);
    if (json_object_get(headers, name) != NULL)
        return MHD_YES;
    bool secret = strcmp(name, "authorization") == 0 || strcmp(name, "x-api-key") == 0 ||
                  strcmp(name, "proxy-authorization") == 0 || strcmp(name, "cookie") == 0;
    json_object_set_new(headers, name, json_string(secret ? "REDACTED" : value ? value : ""));
    return MHD_YES;
}

/* Builds the log entry of a provider request; new reference (NULL without memory). */
static json_t *log_entry(struct MHD_Connection *c, struct conn *cx, const char *method,
                         const char *url, json_t *parsed)
{
    json_t *headers = json_object();
    if (headers != NULL)
        MHD_get_connection_values(c, MHD_HEADER_KIND, collect_header, headers);
    json_t *body = json_null();
    if (cx->too_large) {
        body = json_null();
    } else if (cx->body.len > LOG_BODY_MAX) {
        body = json_pack("{s:I}", "omitted_bytes", (json_int_t)cx->body.len);
    } else if (parsed != NULL) {
        body = json_deep_copy(parsed);
    } else if (cx->body.len > 0) {
        /* Not JSON: keep the text when it is UTF-8 and short, else null. */
        body = json_loadb(cx->body.data, cx->body.len, 0, NULL);
        if (body == NULL && cx->body.len <= LOG_RAW_MAX)
            body = json_stringn(cx->body.data, cx->body.len);
    }
    return json_pack("{s:s,s:s,s:s,s:o,s:o,s:n,s:n,s:I}", "api", stub_api_name(cx->api), "path",
                     url, "method", method, "headers", headers != NULL ? headers : json_object(),
                     "body", body != NULL ? body : json_null(), "status", "rule", "received_at_ms",
                     (json_int_t)evd_now_ms());
}

/* Adds `entry` (stolen; built outside the lock) to the ring, under the lock. */
static void log_push(struct stub_server *s, struct conn *cx, json_t *entry)
{
    if (entry == NULL)
        return;
    uint64_t seq = ++s->next_seq;
    struct log_slot *slot = &s->ring[seq % LOG_RING];
    json_decref(slot->entry);
    slot->seq = seq;
    slot->entry = entry;
    cx->seq = seq;
}

/* ---------------------------------------------------------------- provider endpoints */

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static bool key_ok(const char *want, const char *got)
{
    return got != NULL && evd_consttime_eq(want, strlen(want), got, strlen(got));
}

/*
 * True when the request carries the required key in a header its wire accepts:
 * OpenAI takes `Authorization: Bearer`; Anthropic takes `x-api-key` and also the
 * bearer form, which recent Anthropic SDKs send for API keys.
 */
static bool authorized(struct stub_server *s, struct MHD_Connection *c, bool anthropic)
{
    if (s->require_key == NULL)
        return true;
    if (anthropic && key_ok(s->require_key, header(c, "x-api-key")))
        return true;
    const char *auth = header(c, "Authorization");
    if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
        return false;
    return key_ok(s->require_key, auth + 7);
}

static enum MHD_Result provider_error(struct stub_server *s, struct MHD_Connection *c,
                                      struct conn *cx, bool anthropic, int status, const char *msg,
                                      const char *const *headers)
{
    pthread_mutex_lock(&s->lock);
    note_status(s, cx, status);
    pthread_mutex_unlock(&s->lock);
    return stub_send_json(c, status, stub_wire_error(cx->api, anthropic, status, msg), headers);
}

static const char *fault_message(int status)
{
    switch (status) {
    case 401:
        return "invalid api key (scripted fault)";
    case 429:
        return "rate limit reached (scripted fault)";
    case 529:
        return "overloaded (scripted fault)";
    default:
        return status >= 500 ? "the server had an error while processing the request (scripted "
                               "fault)"
                             : "the request was refused (scripted fault)";
    }
}

static void script_release(struct stub_server *s, struct stub_script *sc)
{
    if (sc == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    bool last = --sc->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (last)
        stub_script_free(sc);
}

/* The API key a request carries, hashed: the rate limit's key. */
static void request_key(struct MHD_Connection *c, char out[65])
{
    const char *k = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (k == NULL && auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0)
        k = auth + 7;
    if (k == NULL)
        out[0] = '\0';
    else
        evd_sha256_hex(k, strlen(k), out);
}

/*
 * The scripted rate limit (call under the lock): true when the request is admitted (and
 * counted). *remaining and *reset_ms describe the window after it; on a refusal *reset_ms
 * is when the oldest request leaves it, the Retry-After to send.
 */
static bool rl_admit(struct stub_server *s, const struct stub_script *sc, const char *key,
                     int64_t now, int64_t *remaining, int64_t *reset_ms)
{
    struct rl_bucket *b = NULL;
    for (size_t i = 0; i < s->nrl && b == NULL; i++)
        if (strcmp(s->rl[i].key, key) == 0)
            b = &s->rl[i];
    if (b == NULL) {
        b = &s->rl[s->nrl < RL_KEYS ? s->nrl++ : RL_KEYS - 1]; /* beyond: one shared */
        snprintf(b->key, sizeof(b->key), "%s", key);
        b->n = b->head = 0;
    }
    if (b->cap != sc->rl_requests) { /* a new script with another limit: a new window */
        int64_t *st = realloc(b->stamps, (size_t)sc->rl_requests * sizeof(*st));
        if (st == NULL) {
            *remaining = 0;
            *reset_ms = 0;
            return true;
        }
        b->stamps = st;
        b->cap = sc->rl_requests;
        b->n = b->head = 0;
    }
    while (b->n > 0 && b->stamps[b->head] <= now - sc->rl_window_ms) {
        b->head = (b->head + 1) % b->cap;
        b->n--;
    }
    bool admit = b->n < b->cap;
    if (admit) {
        b->stamps[(b->head + b->n) % b->cap] = now;
        b->n++;
    }
    *remaining = b->cap - b->n;
    *reset_ms = b->stamps[b->head] + sc->rl_window_ms - now;
    return admit;
}

static enum MHD_Result serve_model(struct stub_server *s, struct MHD_Connection *c, struct conn *cx,
                                   const char *method, const char *url)
{
    enum MHD_Result ret = MHD_NO;
    struct stub_script *sc = NULL;
    json_t *body = NULL;
    struct stub_view v = {.session = cx->session};
    struct stub_out out = {0};
    struct evd_err err = {0};
    bool anthropic = cx->api == STUB_API_MESSAGES;
    bool view_ok = false;
    char msg[EVD_ERR_MSG_MAX + 64];

    if (cx->body.len > 0 && !cx->too_large)
        body = json_loadb(cx->body.data, cx->body.len, 0, NULL);
    if (body != NULL)
        view_ok = stub_view_parse(cx->api, body, &v, &err) == EVD_OK;
    json_t *entry = log_entry(c, cx, method, url, body);
    pthread_mutex_lock(&s->lock);
    sc = s->script;
    sc->refs++;
    log_push(s, cx, entry);
    pthread_mutex_unlock(&s->lock);

    if (strcmp(method, "POST") != 0) {
        ret = provider_error(s, c, cx, anthropic, 405, "use POST for this endpoint", NULL);
        goto out;
    }
    if (cx->too_large) {
        snprintf(msg, sizeof(msg), "request body exceeds %zu bytes", s->max_body);
        ret = provider_error(s, c, cx, anthropic, 413, msg, NULL);
        goto out;
    }
    if (!authorized(s, c, anthropic)) {
        ret = provider_error(s, c, cx, anthropic, 401,
                             anthropic ? "invalid x-api-key" : "Incorrect API key provided", NULL);
        goto out;
    }
    if (body == NULL) {
        ret = provider_error(s, c, cx, anthropic, 400, "the request body is not valid JSON", NULL);
        goto out;
    }
    if (!view_ok) {
        ret =
            provider_error(s, c, cx, anthropic, err.code == EVD_ENOMEM ? 500 : 400, err.msg, NULL);
        goto out;
    }
    if (v.stream) {
        ret = provider_error(s, c, cx, anthropic, 400,
                             "stream: streaming is not supported by evald-stub; send stream "
                             "false",
                             NULL);
        goto out;
    }
    /* The scripted rate limit: headers on every answer from here on, 429 beyond it. */
    char rl_lim[24], rl_rem[24], rl_rst[32], rl_ra[24], rl_ram[24];
    const char *rlh[11] = {NULL};
    size_t nrlh = 0;
    bool admitted = true;
    if (sc->rl_requests > 0) {
        char key[65];
        int64_t remaining = 0, reset_ms = 0;
        request_key(c, key);
        pthread_mutex_lock(&s->lock);
        admitted = rl_admit(s, sc, key, evd_mono_ms(), &remaining, &reset_ms);
        pthread_mutex_unlock(&s->lock);
        if (reset_ms < 0)
            reset_ms = 0;
        /* OpenAI's limit header is per minute: the window's limit scaled to one. */
        snprintf(rl_lim, sizeof(rl_lim), "%lld",
                 (long long)(sc->rl_requests * 60000 / sc->rl_window_ms));
        snprintf(rl_rem, sizeof(rl_rem), "%lld", (long long)remaining);
        snprintf(rl_rst, sizeof(rl_rst), "%lldms", (long long)reset_ms);
        rlh[nrlh++] = "x-ratelimit-limit-requests";
        rlh[nrlh++] = rl_lim;
        rlh[nrlh++] = "x-ratelimit-remaining-requests";
        rlh[nrlh++] = rl_rem;
        rlh[nrlh++] = "x-ratelimit-reset-requests";
        rlh[nrlh++] = rl_rst;
        if (!admitted) {
            snprintf(rl_ra, sizeof(rl_ra), "%lld", (long long)((reset_ms + 999) / 1000));
            snprintf(rl_ram, sizeof(rl_ram), "%lld", (long long)reset_ms);
            rlh[nrlh++] = "Retry-After";
            rlh[nrlh++] = rl_ra;
            rlh[nrlh++] = "retry-after-ms";
            rlh[nrlh++] = rl_ram;
        }
    }
    if (!admitted) {
        ret = provider_error(s, c, cx, anthropic, 429, "rate limit reached (scripted rate limit)",
                             rlh);
        goto out;
    }
    /* Only a well-formed, authorized request consumes a rule (and its `times`). */
    pthread_mutex_lock(&s->lock);
    int rule = stub_script_pick(sc, &v);
    note_rule(s, cx, rule);
    pthread_mutex_unlock(&s->lock);
    const struct stub_action *act = rule >= 0         ? &sc->rules[rule].act
                                    : sc->has_default ? &sc->dflt
                                                      : NULL;
    int64_t latency =
        act != NULL ? (act->has_latency ? act->latency_ms : 0) : stub_default_latency_ms(&v);
    if (latency > 0 && !stub_wait_client(s, c, latency))
        goto out; /* client gone or shutting down: close without answering */
    if (act != NULL && act->fault == STUB_FAULT_STATUS) {
        char ra[32], ram[32];
        const char *headers[11] = {NULL};
        size_t h = 0;
        for (size_t i = 0; i < nrlh && i < 6; i++) /* the rate-limit headers, not its 429's */
            headers[h++] = rlh[i];
        if (act->retry_after_s >= 0) {
            snprintf(ra, sizeof(ra), "%lld", (long long)act->retry_after_s);
            headers[h++] = "Retry-After";
            headers[h++] = ra;
        }
        if (act->retry_after_ms >= 0) {
            snprintf(ram, sizeof(ram), "%lld", (long long)act->retry_after_ms);
            headers[h++] = "retry-after-ms";
            headers[h++] = ram;
        }
        ret = provider_error(s, c, cx, anthropic, act->fault_status,
                             act->fault_message != NULL ? act->fault_message
                                                        : fault_message(act->fault_status),
                             headers);
        goto out;
    }
    if (act != NULL && act->fault == STUB_FAULT_STALL) {
        pthread_mutex_lock(&s->lock);
        s->stalls++;
        pthread_mutex_unlock(&s->lock);
        stub_wait_client(s, c, -1);
        goto out; /* MHD_NO closes the connection */
    }
    enum evd_code rc = act != NULL && act->has_reply ? stub_out_from_action(act, &out)
                                                     : stub_default_reply(&v, &out);
    if (rc != EVD_OK) {
        ret = provider_error(s, c, cx, anthropic, 500, "out of memory", NULL);
        goto out;
    }
    if (act != NULL && act->usage.set)
        out.usage = act->usage;
    stub_usage_derive(&v, &out);
    json_t *reply = stub_wire_reply(&v, &out);
    if (reply == NULL) {
        ret = provider_error(s, c, cx, anthropic, 500, "out of memory", NULL);
        goto out;
    }
    enum stub_fault_kind fault = act != NULL ? act->fault : STUB_FAULT_NONE;
    pthread_mutex_lock(&s->lock);
    note_status(s, cx, 200);
    if (fault == STUB_FAULT_TRUNCATE)
        s->truncations++;
    if (fault == STUB_FAULT_MALFORMED)
        s->malformed++;
    pthread_mutex_unlock(&s->lock);
    if (fault == STUB_FAULT_TRUNCATE || fault == STUB_FAULT_MALFORMED)
        ret = stub_send_half(c, reply, fault == STUB_FAULT_TRUNCATE);
    else if (fault == STUB_FAULT_HEADER)
        ret = stub_send_big_header(s, c, reply, act->header_bytes);
    else
        ret = stub_send_json(c, 200, reply, rlh);
out:
    stub_out_free(&out);
    stub_view_free(&v);
    json_decref(body);
    script_release(s, sc);
    return ret;
}

static enum MHD_Result serve_models(struct stub_server *s, struct MHD_Connection *c,
                                    struct conn *cx, const char *method, const char *url)
{
    bool anthropic = header(c, "anthropic-version") != NULL;
    json_t *entry = log_entry(c, cx, method, url, NULL);
    pthread_mutex_lock(&s->lock);
    struct stub_script *sc = s->script;
    sc->refs++;
    log_push(s, cx, entry);
    pthread_mutex_unlock(&s->lock);
    enum MHD_Result ret;
    if (strcmp(method, "GET") != 0) {
        ret = provider_error(s, c, cx, anthropic, 405, "use GET for this endpoint", NULL);
    } else if (!authorized(s, c, anthropic)) {
        ret = provider_error(s, c, cx, anthropic, 401,
                             anthropic ? "invalid x-api-key" : "Incorrect API key provided", NULL);
    } else if (strcmp(url, "/v1/models") == 0) {
        json_t *list = stub_wire_models(anthropic, sc->models, sc->nmodels);
        pthread_mutex_lock(&s->lock);
        note_status(s, cx, 200);
        pthread_mutex_unlock(&s->lock);
        ret = stub_send_json(c, 200, list, NULL);
    } else {
        const char *id = url + strlen("/v1/models/");
        bool found = false;
        for (size_t i = 0; i < sc->nmodels && !found; i++)
            found = strcmp(sc->models[i], id) == 0;
        if (!found) {
            ret = provider_error(s, c, cx, anthropic, 404, "the model does not exist", NULL);
        } else {
            pthread_mutex_lock(&s->lock);
            note_status(s, cx, 200);
            pthread_mutex_unlock(&s->lock);
            ret = stub_send_json(c, 200, stub_wire_model(anthropic, id), NULL);
        }
    }
    script_release(s, sc);
    return ret;
}

/* ---------------------------------------------------------------- control endpoints */

static json_t *stats_json(struct stub_server *s)
{
    json_t *by_api = json_object(), *by_status = json_object(), *rules = json_array();
    pthread_mutex_lock(&s->lock);
    for (int a = 0; a < STUB_API_COUNT; a++)
        json_object_set_new(by_api, stub_api_name((enum stub_api)a),
                            json_integer((json_int_t)s->by_api[a]));
    for (int st = 0; st < STATUS_MAX; st++) {
        if (s->by_status[st] == 0)
            continue;
        char k[8];
        snprintf(k, sizeof(k), "%d", st);
        json_object_set_new(by_status, k, json_integer((json_int_t)s->by_status[st]));
    }
    for (size_t i = 0; i < s->script->nrules; i++)
        json_array_append_new(rules, json_pack("{s:I,s:I}", "index", (json_int_t)i, "hits",
                                               (json_int_t)s->script->rules[i].hits));
    json_t *st =
        json_pack("{s:I,s:o,s:o,s:i,s:i,s:i,s:o,s:I,s:I,s:I}", "requests", (json_int_t)s->requests,
                  "by_api", by_api, "by_status", by_status, "in_flight", s->in_flight,
                  "max_in_flight", s->max_in_flight, "max_in_flight_per_session",
                  s->max_per_session, "rules", rules, "stalls", (json_int_t)s->stalls,
                  "truncations", (json_int_t)s->truncations, "malformed", (json_int_t)s->malformed);
    json_t *twice = json_array();
    for (size_t k = 0; k < s->noverlap; k++)
        json_array_append_new(twice, json_pack("{s:s,s:i,s:I}", "session", s->overlap[k].key,
                                               "max", s->overlap[k].max, "first_at_ms",
                                               (json_int_t)s->overlap[k].first_ms));
    json_object_set_new(st, "overlaps", json_integer((json_int_t)s->overlaps));
    json_object_set_new(st, "sessions_in_flight_twice", twice);
    pthread_mutex_unlock(&s->lock);
    return st;
}

static json_t *requests_json(struct stub_server *s, struct MHD_Connection *c)
{
    const char *lim = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
    long limit = LOG_RING;
    if (lim != NULL) {
        char *end = NULL;
        limit = strtol(lim, &end, 10);
        if (end == lim || *end != '\0' || limit < 0)
            return NULL;
        if (limit > LOG_RING)
            limit = LOG_RING;
    }
    json_t *list = json_array();
    pthread_mutex_lock(&s->lock);
    uint64_t first = s->next_seq >= (uint64_t)limit ? s->next_seq - (uint64_t)limit + 1 : 1;
    for (uint64_t q = first; q <= s->next_seq && list != NULL; q++) {
        struct log_slot *slot = &s->ring[q % LOG_RING];
        if (slot->seq == q)
            json_array_append_new(list, json_deep_copy(slot->entry));
    }
    pthread_mutex_unlock(&s->lock);
    return json_pack("{s:o}", "requests", list);
}

static void reset(struct stub_server *s)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nrl; i++)
        s->rl[i].n = s->rl[i].head = 0;
    s->requests = s->stalls = s->truncations = s->malformed = 0;
    memset(s->by_api, 0, sizeof(s->by_api));
    memset(s->by_status, 0, sizeof(s->by_status));
    s->max_in_flight = s->in_flight;
    s->max_per_session = 0;
    s->overlaps = 0;
    s->noverlap = 0;
    for (size_t i = 0; i < s->nsessions; i++)
        if (s->sessions[i].n > s->max_per_session)
            s->max_per_session = s->sessions[i].n;
    for (size_t i = 0; i < LOG_RING; i++) {
        json_decref(s->ring[i].entry);
        s->ring[i].entry = NULL;
        s->ring[i].seq = 0;
    }
    for (size_t i = 0; i < s->script->nrules; i++)
        s->script->rules[i].hits = 0;
    pthread_mutex_unlock(&s->lock);
}

static json_t *control_error(const char *msg)
{
    return json_pack("{s:{s:s,s:s}}", "error", "message", msg, "type", "invalid_request_error");
}

static enum MHD_Result put_script(struct stub_server *s, struct MHD_Connection *c, struct conn *cx)
{
    if (cx->too_large)
        return stub_send_json(c, 413, control_error("script exceeds the body limit"), NULL);
    json_error_t jerr;
    json_t *doc = json_loadb(cx->body.data != NULL ? cx->body.data : "", cx->body.len, 0, &jerr);
    if (doc == NULL) {
        char m[256];
        snprintf(m, sizeof(m), "the script is not valid JSON: %s (line %d)", jerr.text, jerr.line);
        return stub_send_json(c, 400, control_error(m), NULL);
    }
    struct evd_err err = {0};
    struct stub_script *sc = stub_script_parse(doc, &err);
    json_decref(doc);
    if (sc == NULL)
        return stub_send_json(c, err.code == EVD_ENOMEM ? 500 : 400, control_error(err.msg), NULL);
    size_t nrules = sc->nrules;
    pthread_mutex_lock(&s->lock);
    struct stub_script *old = s->script;
    s->script = sc;
    pthread_mutex_unlock(&s->lock);
    script_release(s, old);
    evd_log(EVD_LOG_INFO, "script replaced", NULL);
    return stub_send_json(c, 200, json_pack("{s:I}", "rules", (json_int_t)nrules), NULL);
}

static enum MHD_Result serve_control(struct stub_server *s, struct MHD_Connection *c,
                                     struct conn *cx, const char *method, const char *url)
{
    bool get = strcmp(method, "GET") == 0;
    if (strcmp(url, "/_stub/healthz") == 0 && get)
        return stub_send_json(c, 200, json_pack("{s:s}", "status", "ok"), NULL);
    if (strcmp(url, "/_stub/stats") == 0 && get)
        return stub_send_json(c, 200, stats_json(s), NULL);
    if (strcmp(url, "/_stub/requests") == 0 && get) {
        json_t *list = requests_json(s, c);
        if (list == NULL)
            return stub_send_json(c, 400, control_error("limit must be a non-negative integer"), NULL);
        return stub_send_json(c, 200, list, NULL);
    }
    if (strcmp(url, "/_stub/reset") == 0 && strcmp(method, "POST") == 0) {
        reset(s);
        return stub_send_json(c, 200, json_pack("{s:b}", "reset", 1), NULL);
    }
    if (strcmp(url, "/_stub/script") == 0 && strcmp(method, "PUT") == 0)
        return put_script(s, c, cx);
    if (strcmp(url, "/_stub/script") == 0 && get) {
        pthread_mutex_lock(&s->lock);
        json_t *src = json_deep_copy(s->script->source);
        pthread_mutex_unlock(&s->lock);
        return stub_send_json(c, 200, src, NULL);
    }
    bool known = strcmp(url, "/_stub/healthz") == 0 || strcmp(url, "/_stub/stats") == 0 ||
                 strcmp(url, "/_stub/requests") == 0 || strcmp(url, "/_stub/reset") == 0 ||
                 strcmp(url, "/_stub/script") == 0;
    return stub_send_json(c, known ? 405 : 404,
                     control_error(known ? "method not allowed" : "no such control endpoint"),
                     NULL);
}

/* ---------------------------------------------------------------- libmicrohttpd glue */

static enum stub_api route(const char *url)
{
    if (strcmp(url, "/v1/responses") == 0)
        return STUB_API_RESPONSES;
    if (strcmp(url, "/v1/chat/completions") == 0)
        return STUB_API_CHAT;
    if (strcmp(url, "/v1/messages") == 0)
        return STUB_API_MESSAGES;
    if (strcmp(url, "/v1/models") == 0 || strncmp(url, "/v1/models/", 11) == 0)
        return STUB_API_MODELS;
    return STUB_API_OTHER;
}

static enum MHD_Result dispatch(struct stub_server *s, struct MHD_Connection *c, struct conn *cx,
                                const char *method, const char *url)
{
    if (!cx->provider)
        return serve_control(s, c, cx, method, url);
    if (cx->api == STUB_API_MODELS)
        return serve_models(s, c, cx, method, url);
    if (cx->api != STUB_API_OTHER)
        return serve_model(s, c, cx, method, url);
    json_t *entry = log_entry(c, cx, method, url, NULL);
    pthread_mutex_lock(&s->lock);
    log_push(s, cx, entry);
    pthread_mutex_unlock(&s->lock);
    return provider_error(s, c, cx, header(c, "anthropic-version") != NULL, 404, "unknown endpoint",
                          NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    struct stub_server *s = cls;
    struct conn *cx = *con_cls;
    if (cx == NULL) {
        cx = calloc(1, sizeof(*cx));
        if (cx == NULL)
            return MHD_NO;
        cx->srv = s;
        cx->body.limit = s->max_body;
        cx->start_ms = evd_mono_ms();
        cx->provider = strncmp(url, "/_stub/", 7) != 0;
        cx->api = route(url);
        const char *session = header(c, "X-Evald-Session");
        if (session != NULL)
            cx->session = strdup(session);
        if (cx->provider) {
            pthread_mutex_lock(&s->lock);
            s->requests++;
            s->by_api[cx->api]++;
            s->in_flight++;
            if (s->in_flight > s->max_in_flight)
                s->max_in_flight = s->in_flight;
            if (cx->session != NULL)
                session_enter(s, cx->session);
            pthread_mutex_unlock(&s->lock);
        }
        *con_cls = cx;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        if (!cx->too_large && evd_buf_append(&cx->body, upload_data, *upload_data_size) != 0) {
            cx->too_large = true;
            evd_buf_free(&cx->body);
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    return dispatch(s, c, cx, method, url);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    struct stub_server *s = cls;
    struct conn *cx = *con_cls;
    if (cx == NULL)
        return;
    if (cx->provider) {
        pthread_mutex_lock(&s->lock);
        s->in_flight--;
        if (cx->session != NULL)
            session_leave(s, cx->session);
        pthread_mutex_unlock(&s->lock);
        char status[16], dur[32];
        snprintf(status, sizeof(status), "%d", cx->status);
        snprintf(dur, sizeof(dur), "%lld", (long long)(evd_mono_ms() - cx->start_ms));
        evd_log(EVD_LOG_INFO, "request", "api", stub_api_name(cx->api), "status",
                cx->status > 0 ? status : NULL, "answered", cx->status > 0 ? NULL : "false",
                "dur_ms", dur, NULL);
    }
    evd_buf_free(&cx->body);
    free(cx->session);
    free(cx);
    *con_cls = NULL;
}

/* Parses "host:port" or "[v6]:port" and binds a listening socket; -1 with err set. */
static int bind_listen(const char *listen_addr, char *address, size_t addrsz, struct evd_err *err)
{
    char host[256];
    const char *colon = strrchr(listen_addr, ':');
    if (colon == NULL || colon == listen_addr || colon[1] == '\0') {
        evd_err_set(err, EVD_EINVAL, "listen must be host:port, got \"%s\"", listen_addr);
        return -1;
    }
    size_t hl = (size_t)(colon - listen_addr);
    if (listen_addr[0] == '[' && hl >= 2 && listen_addr[hl - 1] == ']') {
        listen_addr++;
        hl -= 2;
    }
    if (hl >= sizeof(host)) {
        evd_err_set(err, EVD_EINVAL, "listen host is too long");
        return -1;
    }
    memcpy(host, listen_addr, hl);
    host[hl] = '\0';
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535) {
        evd_err_set(err, EVD_EINVAL, "listen port must be 0..65535, got \"%s\"", colon + 1);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &res);
    if (gai != 0) {
        evd_err_set(err, EVD_EINVAL, "cannot resolve listen host \"%s\": %s", host,
                    gai_strerror(gai));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        /* A provider takes a thousand connections at once (a burst of calls, each on a
         * connection of its own): with a backlog of 128 the kernel dropped some of them,
         * and each came back a second later, when the client sent its SYN again. */
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
            evd_err_set(err, EVD_EUNAVAIL, "could not listen on %s: %s", listen_addr,
                        strerror(errno));
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        return -1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char numeric[INET6_ADDRSTRLEN + 1], portbuf[16];
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0 ||
        getnameinfo((struct sockaddr *)&ss, sl, numeric, sizeof(numeric), portbuf, sizeof(portbuf),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        evd_err_set(err, EVD_EUNAVAIL, "could not read the bound address");
        close(fd);
        return -1;
    }
    snprintf(address, addrsz, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", numeric, portbuf);
    return fd;
}

enum evd_code stub_server_start(const struct stub_config *cfg, struct stub_script *script,
                                struct stub_server **out, struct evd_err *err)
{
    *out = NULL;
    struct stub_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        stub_script_free(script);
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->lock, NULL);
    atomic_init(&s->stopping, false);
    if (pipe(s->stop_pipe) != 0) {
        pthread_mutex_destroy(&s->lock);
        free(s);
        stub_script_free(script);
        return evd_err_set(err, EVD_EINTERNAL, "could not create a pipe");
    }
    s->script = script;
    s->require_key = cfg->require_key;
    s->max_body = cfg->max_body;
    /* A connection a call in flight: raise the descriptor limit to what the system allows,
     * so that benchmarks can hold thousands of calls at once. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    unsigned limit = 16000;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < (rlim_t)limit + 64)
        limit = nofile.rlim_cur > 128 ? (unsigned)(nofile.rlim_cur - 64) : 64;
    int fd = bind_listen(cfg->listen, s->address, sizeof(s->address), err);
    if (fd < 0) {
        stub_server_stop(s);
        return err != NULL ? err->code : EVD_EUNAVAIL;
    }
    s->mhd = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL,
        NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
        MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_END);
    if (s->mhd == NULL) {
        close(fd);
        stub_server_stop(s);
        return evd_err_set(err, EVD_EUNAVAIL, "could not start the HTTP server");
    }
    *out = s;
    return EVD_OK;
}

const char *stub_server_address(const struct stub_server *s)
{
    return s->address;
}

void stub_server_stop(struct stub_server *s)
{
    if (s == NULL)
        return;
    atomic_store(&s->stopping, true);
    (void)!write(s->stop_pipe[1], "x", 1);
    if (s->mhd != NULL)
        MHD_stop_daemon(s->mhd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    for (size_t i = 0; i < LOG_RING; i++)
        json_decref(s->ring[i].entry);
    for (size_t i = 0; i < s->nsessions; i++)
        free(s->sessions[i].key);
    free(s->sessions);
    for (size_t i = 0; i < RL_KEYS; i++)
        free(s->rl[i].stamps);
    if (s->script != NULL && --s->script->refs == 0)
        stub_script_free(s->script);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
