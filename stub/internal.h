/*
 * What the stub's server files share (server.c, respond.c): its limits, the server's
 * state and a connection's, and the ways to answer. Not part of the stub's interface
 * (stub.h). The locking rules are server.c's (DESIGN there).
 */
#ifndef EVD_STUB_INTERNAL_H
#define EVD_STUB_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/util.h"
#include "stub/stub.h"

#define LOG_RING 500
#define LOG_BODY_MAX (1024 * 1024) /* larger bodies are logged as a size only */
#define LOG_RAW_MAX (64 * 1024)    /* non-JSON bodies up to this size are logged as text */
#define STATUS_MAX 600
/* A wait looks at its deadline and the stop pipe at least this often. Long: a thousand
 * requests waiting out their latency that woke every 50 ms cost the stub more CPU than
 * evald spent on the calls. */
#define WAIT_SLICE_MS 1000

struct log_slot {
    uint64_t seq;  /* 0 = empty */
    json_t *entry; /* new reference owned by the ring */
};

struct session_count {
    char *key;
    int n;
};

/* Sessions seen with two or more requests in flight at once (the first OVERLAPS_MAX). */
#define OVERLAPS_MAX 100
struct overlap {
    char key[128];
    int max;           /* the most in flight at once */
    int64_t first_ms;  /* when it first happened (Unix ms) */
};

/* The arrival times of the requests a key had accepted within the window (a ring). */
#define RL_KEYS 64
struct rl_bucket {
    char key[65]; /* SHA-256 of the API key (not the key itself); "" for none */
    int64_t *stamps;
    int64_t cap, head, n;
};

struct stub_server {
    struct MHD_Daemon *mhd;
    char address[128];
    const char *require_key; /* borrowed from the configuration */
    size_t max_body;
    atomic_bool stopping;
    int stop_pipe[2]; /* readable once stopping: wakes every wait at once */

    pthread_mutex_t lock; /* guards every field below */
    struct stub_script *script;
    uint64_t requests;
    uint64_t by_api[STUB_API_COUNT];
    uint64_t by_status[STATUS_MAX];
    uint64_t stalls, truncations, malformed;
    int in_flight, max_in_flight, max_per_session;
    uint64_t overlaps; /* requests that arrived while their session had one in flight */
    struct overlap overlap[OVERLAPS_MAX];
    size_t noverlap;
    struct session_count *sessions;
    size_t nsessions, capsessions;
    struct log_slot ring[LOG_RING];
    uint64_t next_seq;
    struct rl_bucket rl[RL_KEYS]; /* the scripted rate limit, one rolling window per key */
    size_t nrl;
};

/* Per-request state, created on the first callback and freed in `completed`. */
struct conn {
    struct stub_server *srv;
    struct evd_buf body;
    bool too_large;
    bool provider; /* a /v1 request, counted in flight and in the statistics */
    char *session; /* X-Evald-Session copy, or NULL */
    uint64_t seq;  /* log entry, 0 = none */
    int64_t start_ms;
    enum stub_api api;
    int status;
};

/* ---- answers (respond.c) ---- */

/* Queues `body` (stolen) as JSON; returns MHD's answer. */
enum MHD_Result stub_send_json(struct MHD_Connection *c, int status, json_t *body,
                               const char *const *headers);
/* The first half of `body` (stolen) with status 200; `cut`: the full Content-Length is
 * declared and the connection closed after the half. */
enum MHD_Result stub_send_half(struct MHD_Connection *c, json_t *body, bool cut);
/* `body` (stolen) after a header of `pad` bytes, written while the client reads. */
enum MHD_Result stub_send_big_header(struct stub_server *s, struct MHD_Connection *c,
                                     json_t *body, int64_t pad);
/* Waits ms while the client stays; false as soon as it has gone or the server stops. */
bool stub_wait_client(struct stub_server *s, struct MHD_Connection *c, int64_t ms);

#endif
