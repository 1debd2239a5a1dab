/*
 * The OTLP exporter's configuration: the standard OTEL_* variables (shared contract,
 * OpenTelemetry traces), read once at start-up through a getenv-like function and checked
 * all at once, so a typo is refused at start even when no endpoint is set. An empty
 * variable counts as unset. Messages name the variable and never quote a value: header
 * values hold credentials, and URLs may too.
 * Thread-safety: none needed (runs on the main thread before any other starts); the
 * config owns its strings and its resource object until evd_otel_config_free.
 */
#include "otel/otel.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

/*
 * The numeric settings, one row each. A signal-specific variable, when it has one, wins
 * over the general one (both are checked). Zero is refused for the queue and batch sizes
 * (a queue that holds nothing, or batches of nothing, would export nothing) and for the
 * timeout (no export can finish in no time, and the shutdown flush would get none);
 * zero is fine for the schedule delay (export as soon as a span is queued). The upper
 * bounds keep every value inside a C int (curl's timeouts, an array of a batch's spans).
 */
static const struct num_setting {
    const char *name;
    const char *traces_name; /* the signal-specific variable, or NULL */
    int64_t dflt;
    int64_t min; /* 0 or 1 */
    int64_t max;
    size_t offset; /* of the int64_t in struct evd_otel_config */
} num_settings[] = {
    {"OTEL_BSP_SCHEDULE_DELAY", NULL, 5000, 0, INT_MAX,
     offsetof(struct evd_otel_config, schedule_delay_ms)},
    {"OTEL_BSP_MAX_QUEUE_SIZE", NULL, 2048, 1, 10000000,
     offsetof(struct evd_otel_config, max_queue)},
    {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", NULL, 512, 1, 10000000,
     offsetof(struct evd_otel_config, max_batch)},
    {"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10000, 1, INT_MAX,
     offsetof(struct evd_otel_config, timeout_ms)},
};

#define TRACES_ENDPOINT "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
#define BASE_ENDPOINT "OTEL_EXPORTER_OTLP_ENDPOINT"
#define TRACES_HEADERS "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
#define BASE_HEADERS "OTEL_EXPORTER_OTLP_HEADERS"
#define TRACES_PROTOCOL "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
#define BASE_PROTOCOL "OTEL_EXPORTER_OTLP_PROTOCOL"
#define SERVICE_NAME "OTEL_SERVICE_NAME"
#define RESOURCE_ATTRIBUTES "OTEL_RESOURCE_ATTRIBUTES"
#define SDK_DISABLED "OTEL_SDK_DISABLED"
#define CAPTURE_CONTENT "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

/* The variable's value, NULL when unset or empty. */
static const char *var(const char *(*get)(const char *), const char *name)
{
    const char *v = get(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* The OpenTelemetry boolean: "true" in any case is true, anything else false. */
static bool is_true(const char *v)
{
    return v != NULL && strcasecmp(v, "true") == 0;
}

static enum evd_code read_number(const char *name, const char *v, const struct num_setting *ns,
                                 int64_t *out, struct evd_err *err)
{
    int64_t n = 0;
    if (v[0] == '\0')
        return evd_err_set(err, EVD_EINVAL, "%s must be a non-negative integer", name);
    for (const char *p = v; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return evd_err_set(err, EVD_EINVAL, "%s must be a non-negative integer", name);
        if (n <= ns->max) /* stops growing once past max: no overflow */
            n = n * 10 + (*p - '0');
    }
    if (n < ns->min)
        return evd_err_set(err, EVD_EINVAL, "%s must be a positive integer", name);
    if (n > ns->max)
        return evd_err_set(err, EVD_EINVAL, "%s must be at most %lld", name, (long long)ns->max);
    *out = n;
    return EVD_OK;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* s[*b..*e) without the spaces and tabs at either end. */
static void trim(const char *s, size_t *b, size_t *e)
{
    while (*b < *e && is_space(s[*b]))
        (*b)++;
    while (*e > *b && is_space(s[*e - 1]))
        (*e)--;
}

/* One key=value pair of a k=v,k2=v2 list: key trimmed (not decoded), value trimmed and
 * percent-decoded (new; the decoded value may hold NUL bytes: *vlen is its length). */
struct kv {
    const char *key;
    size_t klen;
    char *value;
    size_t vlen;
};

/*
 * Calls fn for each pair of `list` (the value of variable `name`), numbered from 1; empty
 * pairs (",," or a trailing comma) are skipped but keep their number. Stops at the first
 * error. Never quotes the list in a message.
 */
static enum evd_code each_pair(const char *name, const char *list,
                               enum evd_code (*fn)(const char *name, size_t i, struct kv *kv,
                                                   void *arg, struct evd_err *err),
                               void *arg, struct evd_err *err)
{
    size_t i = 0;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        i++;
        size_t b = 0, e = len;
        trim(p, &b, &e);
        if (b < e) {
            const char *eq = memchr(p + b, '=', e - b);
            size_t kb = b, ke = eq ? (size_t)(eq - p) : 0;
            trim(p, &kb, &ke);
            if (eq == NULL || kb == ke)
                return evd_err_set(err, EVD_EINVAL, "%s: pair %zu is not of the form key=value",
                                   name, i);
            size_t vb = (size_t)(eq - p) + 1, ve = e;
            trim(p, &vb, &ve);
            bool bad;
            struct kv kv = {p + kb, ke - kb, NULL, 0};
            kv.value = evd_pct_decode(p + vb, ve - vb, &kv.vlen, &bad);
            if (kv.value == NULL && bad)
                return evd_err_set(err, EVD_EINVAL, "%s: pair %zu has an invalid percent-encoding",
                                   name, i);
            if (kv.value == NULL)
                return evd_err_set(err, EVD_ENOMEM, "out of memory reading %s", name);
            enum evd_code rc = fn(name, i, &kv, arg, err);
            free(kv.value);
            if (rc != EVD_OK)
                return rc;
        }
        if (comma == NULL)
            return EVD_OK;
        p = comma + 1;
    }
}

/* RFC 9110 token characters: what an HTTP header name is made of. */
static bool is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

struct header_list {
    char *lines[EVD_OTEL_MAX_HEADERS];
    size_t n;
};

static void header_list_free(struct header_list *h)
{
    for (size_t i = 0; i < h->n; i++)
        free(h->lines[i]);
    h->n = 0;
}

static enum evd_code add_header(const char *name, size_t i, struct kv *kv, void *arg,
                                struct evd_err *err)
{
    struct header_list *h = arg;
    for (size_t k = 0; k < kv->klen; k++)
        if (!is_tchar(kv->key[k]))
            return evd_err_set(err, EVD_EINVAL, "%s: pair %zu has a key that is not a header name",
                               name, i);
    /* A decoded CR, LF or NUL would end the header line early or start another. */
    for (size_t k = 0; k < kv->vlen; k++) {
        unsigned char c = (unsigned char)kv->value[k];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return evd_err_set(err, EVD_EINVAL, "%s: pair %zu has a control character in its value",
                               name, i);
    }
    if (h->n == EVD_OTEL_MAX_HEADERS)
        return evd_err_set(err, EVD_EINVAL, "%s: more than %d headers", name, EVD_OTEL_MAX_HEADERS);
    size_t len = kv->klen + 2 + kv->vlen + 1;
    char *line = malloc(len);
    if (line == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory reading %s", name);
    snprintf(line, len, "%.*s: %s", (int)kv->klen, kv->key, kv->value);
    h->lines[h->n++] = line;
    return EVD_OK;
}

/* Resource attributes as strings into the object arg (borrowed); a later key wins. */
static enum evd_code add_attribute(const char *name, size_t i, struct kv *kv, void *arg,
                                   struct evd_err *err)
{
    json_t *attrs = arg;
    if (!evd_utf8_valid(kv->key, kv->klen) || !evd_utf8_valid(kv->value, kv->vlen) ||
        memchr(kv->value, '\0', kv->vlen) != NULL)
        return evd_err_set(err, EVD_EINVAL, "%s: pair %zu is not valid UTF-8 text", name, i);
    char *key = strndup(kv->key, kv->klen);
    json_t *v = json_stringn(kv->value, kv->vlen); /* new reference */
    int rc = key && v ? json_object_set_new(attrs, key, v) : (json_decref(v), -1);
    free(key);
    if (rc != 0)
        return evd_err_set(err, EVD_ENOMEM, "out of memory reading %s", name);
    return EVD_OK;
}

/* Whether url is http:// or https:// with a host, and no space or control character. */
static bool is_http_url(const char *url)
{
    size_t skip;
    if (strncasecmp(url, "http://", 7) == 0)
        skip = 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        skip = 8;
    else
        return false;
    for (const unsigned char *p = (const unsigned char *)url; *p != '\0'; p++)
        if (*p <= 0x20 || *p == 0x7f)
            return false;
    const char *host = url + skip;
    return host[0] != '\0' && host[0] != '/' && host[0] != '?' && host[0] != '#';
}

/* The traces URL into *out (new): the traces variable as is, else <base>/v1/traces. */
static enum evd_code read_endpoint(const char *(*get)(const char *), char **out,
                                   struct evd_err *err)
{
    const char *traces = var(get, TRACES_ENDPOINT);
    const char *base = var(get, BASE_ENDPOINT);
    if (traces != NULL && !is_http_url(traces))
        return evd_err_set(err, EVD_EINVAL, "%s must be an http or https URL", TRACES_ENDPOINT);
    if (base != NULL && !is_http_url(base))
        return evd_err_set(err, EVD_EINVAL, "%s must be an http or https URL", BASE_ENDPOINT);
    if (traces != NULL) {
        *out = strdup(traces);
    } else if (base != NULL) {
        size_t len = strlen(base);
        while (len > 0 && base[len - 1] == '/')
            len--;
        size_t sz = len + sizeof("/v1/traces");
        *out = malloc(sz);
        if (*out != NULL)
            snprintf(*out, sz, "%.*s/v1/traces", (int)len, base);
    } else {
        return EVD_OK;
    }
    if (*out == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory reading %s", BASE_ENDPOINT);
    return EVD_OK;
}

static enum evd_code read_protocol(const char *(*get)(const char *), enum evd_otel_protocol *out,
                                   struct evd_err *err)
{
    /* Both are checked; the traces one, when set, is the one used. */
    const char *names[] = {BASE_PROTOCOL, TRACES_PROTOCOL};
    for (size_t i = 0; i < 2; i++) {
        const char *v = var(get, names[i]);
        if (v == NULL)
            continue;
        if (strcmp(v, "http/json") == 0)
            *out = EVD_OTEL_HTTP_JSON;
        else if (strcmp(v, "http/protobuf") == 0)
            *out = EVD_OTEL_HTTP_PROTOBUF;
        else /* grpc among them: evald speaks OTLP over HTTP only */
            return evd_err_set(err, EVD_EINVAL, "%s must be http/json or http/protobuf", names[i]);
    }
    return EVD_OK;
}

static enum evd_code read_headers(const char *(*get)(const char *), struct evd_otel_config *cfg,
                                  struct evd_err *err)
{
    struct header_list base = {0}, traces = {0};
    const char *bv = var(get, BASE_HEADERS), *tv = var(get, TRACES_HEADERS);
    enum evd_code rc = EVD_OK;
    if (bv != NULL && (rc = each_pair(BASE_HEADERS, bv, add_header, &base, err)) != EVD_OK)
        goto out;
    if (tv != NULL && (rc = each_pair(TRACES_HEADERS, tv, add_header, &traces, err)) != EVD_OK)
        goto out;
    struct header_list *use = tv != NULL ? &traces : &base;
    memcpy(cfg->headers, use->lines, use->n * sizeof(use->lines[0]));
    cfg->nheaders = use->n;
    use->n = 0; /* moved to cfg */
out:
    header_list_free(&base);
    header_list_free(&traces);
    return rc;
}

/* The resource: OTEL_RESOURCE_ATTRIBUTES, then service.name (OTEL_SERVICE_NAME wins over
 * one given in the attributes, else "evald") and service.version (evald's own unless the
 * attributes give one: a deployment's explicit label wins over the built-in default). */
static enum evd_code read_resource(const char *(*get)(const char *), struct evd_otel_config *cfg,
                                   struct evd_err *err)
{
    const char *attrs = var(get, RESOURCE_ATTRIBUTES);
    const char *service = var(get, SERVICE_NAME);
    cfg->resource = json_object();
    if (cfg->resource == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory reading %s", RESOURCE_ATTRIBUTES);
    enum evd_code rc;
    if (attrs != NULL &&
        (rc = each_pair(RESOURCE_ATTRIBUTES, attrs, add_attribute, cfg->resource, err)) != EVD_OK)
        return rc;
    if (service != NULL && !evd_utf8_valid(service, strlen(service)))
        return evd_err_set(err, EVD_EINVAL, "%s must be valid UTF-8 text", SERVICE_NAME);
    int fail = 0;
    if (service != NULL)
        fail |= json_object_set_new(cfg->resource, "service.name", json_string(service));
    else if (json_object_get(cfg->resource, "service.name") == NULL)
        fail |= json_object_set_new(cfg->resource, "service.name", json_string("evald"));
    if (json_object_get(cfg->resource, "service.version") == NULL)
        fail |= json_object_set_new(cfg->resource, "service.version", json_string(EVALD_VERSION));
    if (fail)
        return evd_err_set(err, EVD_ENOMEM, "out of memory reading %s", RESOURCE_ATTRIBUTES);
    return EVD_OK;
}

enum evd_code evd_otel_config_read(const char *(*get)(const char *name),
                                   struct evd_otel_config *cfg, struct evd_err *err)
{
    enum evd_code rc;
    memset(cfg, 0, sizeof(*cfg));
    cfg->protocol = EVD_OTEL_HTTP_JSON;

    for (size_t i = 0; i < sizeof(num_settings) / sizeof(num_settings[0]); i++) {
        const struct num_setting *ns = &num_settings[i];
        int64_t *field = (int64_t *)((char *)cfg + ns->offset);
        *field = ns->dflt;
        const char *names[] = {ns->name, ns->traces_name}; /* the last one set wins */
        for (size_t k = 0; k < 2; k++) {
            const char *v = names[k] ? var(get, names[k]) : NULL;
            if (v != NULL && (rc = read_number(names[k], v, ns, field, err)) != EVD_OK)
                goto out;
        }
    }
    /* A batch larger than the queue could never fill: the queue bounds it. */
    if (cfg->max_batch > cfg->max_queue)
        cfg->max_batch = cfg->max_queue;

    if ((rc = read_protocol(get, &cfg->protocol, err)) != EVD_OK)
        goto out;
    if ((rc = read_endpoint(get, &cfg->endpoint, err)) != EVD_OK)
        goto out;
    if ((rc = read_headers(get, cfg, err)) != EVD_OK)
        goto out;
    if ((rc = read_resource(get, cfg, err)) != EVD_OK)
        goto out;
    cfg->capture_content = is_true(var(get, CAPTURE_CONTENT));
    cfg->enabled = cfg->endpoint != NULL && !is_true(var(get, SDK_DISABLED));
    rc = EVD_OK;
out:
    if (rc != EVD_OK)
        evd_otel_config_free(cfg);
    return rc;
}

void evd_otel_config_free(struct evd_otel_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->endpoint);
    for (size_t i = 0; i < cfg->nheaders; i++)
        free(cfg->headers[i]);
    json_decref(cfg->resource);
    memset(cfg, 0, sizeof(*cfg));
}
