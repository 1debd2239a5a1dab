/*
 * The test webhook receiver; see webhooks_receiver.h. Requests are kept in a growing
 * array under `mu`; a connection's body accumulates in its own struct until the
 * request is complete, then the whole record is appended at once.
 */
#include "tests/support/webhooks_receiver.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

#define BODY_LIMIT (1024 * 1024)

struct evd_t_receiver {
    struct MHD_Daemon *mhd;
    unsigned port;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct evd_t_hook *hooks;
    size_t n, cap, acked;
    int fail_left; /* < 0: always */
    int fail_status;
    bool hang;     /* leave requests unanswered */
    bool stopping; /* wakes the hanging requests */
};

struct conn {
    char *body;
    size_t len;
    bool too_big;
};

static void copy_header(struct MHD_Connection *c, const char *name, char *out, size_t n)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
    snprintf(out, n, "%s", v ? v : "");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
    (void)version;
    struct evd_t_receiver *r = cls;
    struct conn *cx = *con_cls;
    if (cx == NULL) {
        cx = calloc(1, sizeof(*cx));
        if (cx == NULL)
            return MHD_NO;
        *con_cls = cx;
        return MHD_YES;
    }
    if (*size > 0) {
        if (!cx->too_big && cx->len + *size <= BODY_LIMIT) {
            char *nb = realloc(cx->body, cx->len + *size + 1);
            if (nb != NULL) {
                memcpy(nb + cx->len, data, *size);
                cx->body = nb;
                cx->len += *size;
                cx->body[cx->len] = '\0';
            }
        } else {
            cx->too_big = true;
        }
        *size = 0;
        return MHD_YES;
    }
    struct evd_t_hook h = {0};
    snprintf(h.method, sizeof(h.method), "%s", method);
    snprintf(h.path, sizeof(h.path), "%s", url);
    copy_header(c, "Content-Type", h.content_type, sizeof(h.content_type));
    copy_header(c, "X-Evald-Event-Id", h.event_id, sizeof(h.event_id));
    copy_header(c, "X-Evald-Event-Type", h.event_type, sizeof(h.event_type));
    copy_header(c, "X-Evald-Delivery-Id", h.delivery_id, sizeof(h.delivery_id));
    copy_header(c, "X-Evald-Timestamp", h.timestamp, sizeof(h.timestamp));
    copy_header(c, "X-Evald-Signature", h.signature, sizeof(h.signature));
    h.body = cx->body ? cx->body : strdup("");
    h.len = cx->len;
    cx->body = NULL;
    cx->len = 0;

    pthread_mutex_lock(&r->mu);
    int status = 204;
    bool hang = r->hang;
    if (hang) {
        status = 0;
    } else if (r->fail_left != 0) {
        status = r->fail_status;
        if (r->fail_left > 0)
            r->fail_left--;
    }
    h.answered = status;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct evd_t_hook *nh = realloc(r->hooks, cap * sizeof(*nh));
        if (nh != NULL) {
            r->hooks = nh;
            r->cap = cap;
        }
    }
    if (r->n < r->cap) {
        r->hooks[r->n++] = h;
        h.body = NULL;
    }
    if (status >= 200 && status < 300)
        r->acked++;
    pthread_cond_broadcast(&r->cv);
    while (hang && r->hang && !r->stopping)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
    free(h.body);
    if (hang)
        return MHD_NO; /* the client gave up long ago: close without an answer */

    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (resp == NULL)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct conn *cx = *con_cls;
    if (cx != NULL) {
        free(cx->body);
        free(cx);
        *con_cls = NULL;
    }
}

struct evd_t_receiver *evd_t_receiver_start(unsigned port)
{
    struct evd_t_receiver *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    r->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                  MHD_USE_POLL,
                              0, NULL, NULL, on_request, r, MHD_OPTION_SOCK_ADDR, &sa,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, r, MHD_OPTION_END);
    if (r->mhd == NULL) {
        evd_t_receiver_stop(r);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(r->mhd, MHD_DAEMON_INFO_BIND_PORT);
    r->port = info ? info->port : 0;
    return r;
}

unsigned evd_t_receiver_port(const struct evd_t_receiver *r)
{
    return r->port;
}

void evd_t_receiver_fail(struct evd_t_receiver *r, int n, int status)
{
    pthread_mutex_lock(&r->mu);
    r->fail_left = n;
    r->fail_status = status;
    pthread_mutex_unlock(&r->mu);
}

void evd_t_receiver_hang(struct evd_t_receiver *r, bool on)
{
    pthread_mutex_lock(&r->mu);
    r->hang = on;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

size_t evd_t_receiver_count(struct evd_t_receiver *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

size_t evd_t_receiver_acked(struct evd_t_receiver *r)
{
    pthread_mutex_lock(&r->mu);
    size_t n = r->acked;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static bool wait_for(struct evd_t_receiver *r, const size_t *counter, size_t n, int timeout_ms)
{
    struct timespec until;
    evd_clock_after(CLOCK_REALTIME, timeout_ms, &until);
    pthread_mutex_lock(&r->mu);
    while (*counter < n)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &until) != 0)
            break;
    bool ok = *counter >= n;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

bool evd_t_receiver_wait_acked(struct evd_t_receiver *r, size_t n, int timeout_ms)
{
    return wait_for(r, &r->acked, n, timeout_ms);
}

bool evd_t_receiver_wait_count(struct evd_t_receiver *r, size_t n, int timeout_ms)
{
    return wait_for(r, &r->n, n, timeout_ms);
}

bool evd_t_receiver_get(struct evd_t_receiver *r, size_t i, struct evd_t_hook *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&r->mu);
    bool ok = i < r->n;
    if (ok) {
        *out = r->hooks[i];
        out->body = malloc(r->hooks[i].len + 1);
        if (out->body != NULL) {
            memcpy(out->body, r->hooks[i].body, r->hooks[i].len + 1);
        } else {
            ok = false;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

void evd_t_hook_free(struct evd_t_hook *h)
{
    free(h->body);
    h->body = NULL;
}

void evd_t_receiver_stop(struct evd_t_receiver *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->mhd != NULL)
        MHD_stop_daemon(r->mhd);
    for (size_t i = 0; i < r->n; i++)
        free(r->hooks[i].body);
    free(r->hooks);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

bool evd_t_hook_signature_ok(const struct evd_t_hook *h, const char *secret)
{
    long long t = 0;
    char hex[80] = "";
    if (sscanf(h->signature, "t=%lld,v1=%64[0-9a-f]", &t, hex) != 2 || strlen(hex) != 64)
        return false;
    if (atoll(h->timestamp) != t)
        return false;
    char *msg = NULL;
    size_t mlen = 0;
    FILE *f = open_memstream(&msg, &mlen);
    if (f == NULL)
        return false;
    fprintf(f, "%lld.", t);
    fwrite(h->body, 1, h->len, f);
    fclose(f);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (unsigned char *)msg, mlen, mac, &maclen);
    free(msg);
    char want[65];
    for (unsigned i = 0; i < maclen && i < 32; i++)
        snprintf(want + 2 * i, 3, "%02x", mac[i]);
    return maclen == 32 && strcmp(want, hex) == 0;
}
