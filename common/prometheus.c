/* Fixed-size metric tables under one mutex; see metrics.h. */
#include "common/prometheus.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define MAX_HTTP 256
#define MAX_SERIES 128
static const double buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1,   0.25,   0.5,   1.0,  2.5,   10.0};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct http_series {
    char route[96];
    char method[8];
    int status;
    unsigned long count;
    double sum;
    unsigned long bucket[NBUCKETS];
};

struct series {
    char name[64];
    char label[32];
    char value[64];
    double v;
    int gauge;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct http_series http[MAX_HTTP];
static size_t nhttp;
static struct series other[MAX_SERIES];
static size_t nother;

void evd_metrics_http(const char *route, const char *method, int status, double seconds)
{
    pthread_mutex_lock(&mu);
    struct http_series *s = NULL;
    for (size_t i = 0; i < nhttp && s == NULL; i++)
        if (http[i].status == status && strcmp(http[i].route, route) == 0 &&
            strcmp(http[i].method, method) == 0)
            s = &http[i];
    if (s == NULL && nhttp < MAX_HTTP) {
        s = &http[nhttp++];
        snprintf(s->route, sizeof(s->route), "%s", route);
        snprintf(s->method, sizeof(s->method), "%s", method);
        s->status = status;
    }
    if (s != NULL) {
        s->count++;
        s->sum += seconds;
        for (size_t b = 0; b < NBUCKETS; b++)
            if (seconds <= buckets[b])
                s->bucket[b]++;
    }
    pthread_mutex_unlock(&mu);
}

static struct series *find(const char *name, const char *label, const char *value, int gauge)
{
    for (size_t i = 0; i < nother; i++)
        if (strcmp(other[i].name, name) == 0 && strcmp(other[i].label, label ? label : "") == 0 &&
            strcmp(other[i].value, value ? value : "") == 0)
            return &other[i];
    if (nother >= MAX_SERIES)
        return NULL;
    struct series *s = &other[nother++];
    snprintf(s->name, sizeof(s->name), "%s", name);
    snprintf(s->label, sizeof(s->label), "%s", label ? label : "");
    snprintf(s->value, sizeof(s->value), "%s", value ? value : "");
    s->gauge = gauge;
    return s;
}

void evd_metrics_count(const char *name, const char *label, const char *value, double delta)
{
    pthread_mutex_lock(&mu);
    struct series *s = find(name, label, value, 0);
    if (s)
        s->v += delta;
    pthread_mutex_unlock(&mu);
}

void evd_metrics_gauge(const char *name, double value)
{
    pthread_mutex_lock(&mu);
    struct series *s = find(name, NULL, NULL, 1);
    if (s)
        s->v = value;
    pthread_mutex_unlock(&mu);
}

int evd_metrics_render(struct evd_buf *out)
{
    int rc = 0;
    pthread_mutex_lock(&mu);
    rc |= evd_buf_printf(out, "# HELP evald_http_requests_total HTTP requests served.\n"
                              "# TYPE evald_http_requests_total counter\n");
    for (size_t i = 0; i < nhttp; i++)
        rc |= evd_buf_printf(out,
                             "evald_http_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} "
                             "%lu\n",
                             http[i].route, http[i].method, http[i].status, http[i].count);
    rc |= evd_buf_printf(out,
                         "# HELP evald_http_request_duration_seconds HTTP handling latency.\n"
                         "# TYPE evald_http_request_duration_seconds histogram\n");
    for (size_t i = 0; i < nhttp; i++) {
        const struct http_series *s = &http[i];
        for (size_t b = 0; b < NBUCKETS; b++)
            rc |= evd_buf_printf(out,
                                 "evald_http_request_duration_seconds_bucket{route=\"%s\",method="
                                 "\"%s\",status=\"%d\",le=\"%g\"} %lu\n",
                                 s->route, s->method, s->status, buckets[b], s->bucket[b]);
        rc |= evd_buf_printf(out,
                             "evald_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\","
                             "status=\"%d\",le=\"+Inf\"} %lu\n"
                             "evald_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\","
                             "status=\"%d\"} %.6f\n"
                             "evald_http_request_duration_seconds_count{route=\"%s\",method=\"%s\","
                             "status=\"%d\"} %lu\n",
                             s->route, s->method, s->status, s->count, s->route, s->method,
                             s->status, s->sum, s->route, s->method, s->status, s->count);
    }
    /* One TYPE line per name, then every series of that name. */
    for (size_t i = 0; i < nother; i++) {
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(other[j].name, other[i].name) == 0;
        if (seen)
            continue;
        rc |= evd_buf_printf(out, "# TYPE %s %s\n", other[i].name,
                             other[i].gauge ? "gauge" : "counter");
        for (size_t k = i; k < nother; k++) {
            const struct series *s = &other[k];
            if (strcmp(s->name, other[i].name) != 0)
                continue;
            if (s->label[0])
                rc |= evd_buf_printf(out, "%s{%s=\"%s\"} %.17g\n", s->name, s->label, s->value,
                                     s->v);
            else
                rc |= evd_buf_printf(out, "%s %.17g\n", s->name, s->v);
        }
    }
    pthread_mutex_unlock(&mu);
    return rc ? -1 : 0;
}
