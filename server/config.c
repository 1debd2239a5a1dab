/*
 * The configuration table and its loader. Every setting is one row of `settings`
 * below; --help, parsing and validation are all driven by it, so a new setting is
 * one line. Not thread-safe: called once from main before any thread starts.
 */
#include "server/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

enum kind { K_STR, K_INT, K_SECRET, K_ENV_ONLY };

struct setting {
    const char *env;
    const char *flag; /* without the leading "--"; NULL for environment-only */
    enum kind kind;
    const char *def;  /* default as text; NULL = unset */
    long min, max;    /* for K_INT */
    size_t offset;    /* into struct evd_config; (size_t)-1 for env-only rows */
    const char *help;
};

#define OFF(f) offsetof(struct evd_config, f)
#define NOFIELD ((size_t)-1)

static const struct setting settings[] = {
    {"EVALD_DATABASE_URL", "database-url", K_SECRET, NULL, 0, 0, OFF(database_url),
     "libpq connection string or URI (make run starts a private PostgreSQL and sets it)"},
    {"EVALD_LISTEN", "listen", K_STR, "127.0.0.1:8080", 0, 0, OFF(listen),
     "address:port to serve ([::1]:8080 for IPv6; port 0 picks a free port)"},
    {"EVALD_WORKERS", "workers", K_INT, NULL, 1, 4096, OFF(workers),
     "worker threads per process; unset = EVALD_MAX_CONCURRENCY (the older name of that knob)"},
    {"EVALD_WORKER_CONNECTIONS", "worker-connections", K_INT, "16", 1, 256,
     OFF(worker_connections),
     "database connections the workers share (a worker holds one only between provider calls)"},
    {"EVALD_SWEEP_INTERVAL_MS", "sweep-interval-ms", K_INT, "15000", 50, 3600000,
     OFF(sweep_interval_ms), "sweeper period in milliseconds"},
    {"EVALD_LEASE_MS", "lease-ms", K_INT, "30000", 200, 3600000, OFF(lease_ms),
     "job lease length; a worker renews it while a run is in flight"},
    {"EVALD_API_TOKEN", "api-token", K_SECRET, NULL, 0, 0, OFF(api_token),
     "when set, /v1 requests need 'Authorization: Bearer <token>'; required beyond loopback"},
    {"EVALD_MAX_RUNS", "max-runs", K_INT, "100", 1, 10000, OFF(max_runs),
     "upper bound of runs per variant"},
    {"EVALD_MAX_CONCURRENCY", "max-concurrency", K_INT, "256", 1, 4096, OFF(max_concurrency),
     "provider calls one process may have in flight (its worker threads), and the largest "
     "concurrency an experiment may ask for"},
    {"EVALD_MAX_EXPERIMENT_RUNS", "max-experiment-runs", K_INT, "100000", 1, 10000000,
     OFF(max_experiment_runs), "upper bound of an experiment's runs (cases x arms x repeats)"},
    {"EVALD_MAX_DATASET_CASES", "max-dataset-cases", K_INT, "10000", 1, 1000000,
     OFF(max_dataset_cases), "upper bound of cases per dataset"},
    {"EVALD_MAX_DATASET_BYTES", "max-dataset-bytes", K_INT, "33554432", 1024, 1073741824,
     OFF(max_dataset_bytes),
     "body limit of dataset uploads in bytes (the 1 MiB limit of other routes does not apply)"},
    {"EVALD_PROVIDERS_FILE", "providers-file", K_STR, NULL, 0, 0, OFF(providers_file),
     "JSON file of extra model providers"},
    {"EVALD_PRICES_FILE", "prices-file", K_STR, NULL, 0, 0, OFF(prices_file),
     "JSON file of model prices that override the built-in price table"},
    {"EVALD_DB_POOL_SIZE", "db-pool-size", K_INT, "8", 1, 256, OFF(db_pool_size),
     "database connections shared by HTTP handlers"},
    {"EVALD_HTTP_THREADS", "http-threads", K_INT, "8", 1, 256, OFF(http_threads),
     "HTTP threads, each polling its share of the connections with epoll"},
    {"EVALD_HTTP_HANDLERS", "http-handlers", K_INT, "16", 1, 1024, OFF(http_handlers),
     "handler threads: they run every request that reads the database, so that the HTTP "
     "threads never wait for it"},
    {"EVALD_HTTP_TIMEOUT_SECONDS", "http-timeout-seconds", K_INT, "10", 1, 3600,
     OFF(http_timeout_seconds),
     "a connection is closed when its request headers take longer than this, or when it sends "
     "and accepts nothing for this long (three times as long while a request is in progress; "
     "open event streams are exempt while they wait)"},
    {"EVALD_HTTP_MAX_CONNECTIONS", "http-max-connections", K_INT, "16000", 16, 1000000,
     OFF(http_max_connections),
     "open HTTP connections at most; more are closed at once (lowered to fit RLIMIT_NOFILE)"},
    {"EVALD_HTTP_MAX_CONNECTIONS_PER_IP", "http-max-connections-per-ip", K_INT, "256", 1, 1000000,
     OFF(http_max_connections_per_ip), "open HTTP connections at most from one client address"},
    {"EVALD_LOG_LEVEL", "log-level", K_STR, "info", 0, 0, OFF(log_level),
     "debug, info, warn or error"},
    {"III_URL", "iii-url", K_STR, NULL, 0, 0, OFF(iii_url),
     "iii engine WebSocket URL, e.g. ws://127.0.0.1:49134; unset = no adapter"},
    {"EVALD_WEBHOOK_ALLOW_HOSTS", "webhook-allow-hosts", K_STR, NULL, 0, 0,
     OFF(webhook_allow_hosts),
     "comma-separated hosts webhooks may target (*.example.com allowed); unset = any public host"},
    {"EVALD_WEBHOOK_WORKERS", "webhook-workers", K_INT, "2", 0, 64, OFF(webhook_workers),
     "webhook delivery threads per process (0 = this process delivers none)"},
    {"EVALD_WEBHOOK_BACKOFF_MS", "webhook-backoff-ms", K_INT, "5000", 10, 3600000,
     OFF(webhook_backoff_ms),
     "first webhook retry delay, doubling up to 1 h (tests lower it; keep the default)"},
    {"EVALD_SECRET_KEY", "secret-key", K_SECRET, NULL, 0, 0, OFF(secret_key),
     "64 hex characters (openssl rand -hex 32) sealing webhook secrets in the database; the "
     "same on every process; unset = no subscriptions"},
    {"OPENAI_BASE_URL", "openai-base-url", K_STR, "https://api.openai.com/v1", 0, 0,
     OFF(openai_base_url), "base URL of providers openai and openai-codex (Responses API)"},
    {"ANTHROPIC_BASE_URL", "anthropic-base-url", K_STR, "https://api.anthropic.com", 0, 0,
     OFF(anthropic_base_url), "base URL of provider anthropic (Messages API)"},
    {"OPENAI_API_KEY", NULL, K_ENV_ONLY, NULL, 0, 0, NOFIELD,
     "API key of openai and openai-codex (environment only; never stored or logged)"},
    {"ANTHROPIC_API_KEY", NULL, K_ENV_ONLY, NULL, 0, 0, NOFIELD,
     "API key of anthropic (environment only; never stored or logged)"},
};

#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static char **str_field(struct evd_config *cfg, const struct setting *s)
{
    return (char **)((char *)cfg + s->offset);
}

static long *int_field(struct evd_config *cfg, const struct setting *s)
{
    return (long *)((char *)cfg + s->offset);
}

static enum evd_code assign(struct evd_config *cfg, const struct setting *s, const char *value,
                            const char *source, struct evd_err *err)
{
    if (s->kind == K_INT) {
        char *end = NULL;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (errno != 0 || end == value || *end != '\0' || v < s->min || v > s->max)
            return evd_err_set(err, EVD_EINVAL, "%s must be an integer between %ld and %ld",
                               source, s->min, s->max);
        *int_field(cfg, s) = v;
        return EVD_OK;
    }
    char *copy = strdup(value);
    if (copy == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    free(*str_field(cfg, s));
    *str_field(cfg, s) = copy;
    return EVD_OK;
}

bool evd_config_host_is_loopback(const char *host)
{
    return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
           strcmp(host, "localhost") == 0;
}

static enum evd_code parse_listen(struct evd_config *cfg, struct evd_err *err)
{
    const char *l = cfg->listen;
    const char *colon;
    size_t hlen;
    const char *host = l;
    if (l[0] == '[') {
        const char *close = strchr(l, ']');
        if (close == NULL || close[1] != ':')
            goto bad;
        host = l + 1;
        hlen = (size_t)(close - host);
        colon = close + 1;
    } else {
        colon = strrchr(l, ':');
        if (colon == NULL)
            goto bad;
        hlen = (size_t)(colon - l);
    }
    if (hlen == 0 || hlen >= sizeof(cfg->listen_host))
        goto bad;
    memcpy(cfg->listen_host, host, hlen);
    cfg->listen_host[hlen] = '\0';
    char *end = NULL;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno != 0 || end == colon + 1 || *end != '\0' || port < 0 || port > 65535)
        goto bad;
    cfg->listen_port = (unsigned)port;
    cfg->listen_loopback = evd_config_host_is_loopback(cfg->listen_host);
    return EVD_OK;
bad:
    return evd_err_set(err, EVD_EINVAL,
                       "EVALD_LISTEN must be host:port (e.g. 127.0.0.1:8080 or [::1]:8080)");
}

enum evd_code evd_config_load(struct evd_config *cfg, int argc, char **argv,
                              const char *(*getenv_fn)(const char *name), struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    memset(cfg, 0, sizeof(*cfg));
    /* --help and --version answer whatever the environment holds (a container image sets
     * EVALD_LISTEN=0.0.0.0:8080 without a token): nothing is parsed or validated then. */
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0)
            cfg->help = true;
        else if (strcmp(argv[a], "--version") == 0)
            cfg->version = true;
    }
    if (cfg->help || cfg->version)
        return EVD_OK;
    for (size_t i = 0; i < NSETTINGS && rc == EVD_OK; i++) {
        const struct setting *s = &settings[i];
        if (s->offset == NOFIELD)
            continue;
        if (s->def != NULL)
            rc = assign(cfg, s, s->def, s->env, err);
        const char *v = getenv_fn ? getenv_fn(s->env) : getenv(s->env);
        if (rc == EVD_OK && v != NULL && *v != '\0')
            rc = assign(cfg, s, v, s->env, err);
    }
    for (int a = 1; a < argc && rc == EVD_OK; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            cfg->help = true;
            continue;
        }
        if (strcmp(arg, "--version") == 0) {
            cfg->version = true;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) {
            rc = evd_err_set(err, EVD_EINVAL, "unexpected argument '%s' (see --help)", arg);
            break;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const struct setting *found = NULL;
        for (size_t i = 0; i < NSETTINGS; i++)
            if (settings[i].flag && strlen(settings[i].flag) == nlen &&
                strncmp(settings[i].flag, name, nlen) == 0)
                found = &settings[i];
        if (found == NULL) {
            rc = evd_err_set(err, EVD_EINVAL, "unknown option '--%.*s' (see --help)", (int)nlen,
                             name);
            break;
        }
        const char *value = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
        if (value == NULL) {
            rc = evd_err_set(err, EVD_EINVAL, "option --%s needs a value", found->flag);
            break;
        }
        char source[64];
        snprintf(source, sizeof(source), "--%s", found->flag);
        rc = assign(cfg, found, value, source, err);
    }
    if (rc == EVD_OK)
        rc = parse_listen(cfg, err);
    if (rc == EVD_OK && evd_log_level_parse(cfg->log_level) < 0)
        rc = evd_err_set(err, EVD_EINVAL, "EVALD_LOG_LEVEL must be debug, info, warn or error");
    if (rc == EVD_OK && !cfg->listen_loopback && cfg->api_token == NULL)
        rc = evd_err_set(err, EVD_EINVAL,
                         "EVALD_LISTEN: refusing to listen on non-loopback address %s without "
                         "EVALD_API_TOKEN",
                         cfg->listen_host);
    if (rc == EVD_OK && cfg->api_token != NULL && strlen(cfg->api_token) < 16)
        rc = evd_err_set(err, EVD_EINVAL, "EVALD_API_TOKEN must be at least 16 characters");
    if (rc == EVD_OK && cfg->secret_key != NULL &&
        (strlen(cfg->secret_key) != 64 || strspn(cfg->secret_key, "0123456789abcdefABCDEF") != 64))
        rc = evd_err_set(err, EVD_EINVAL,
                         "EVALD_SECRET_KEY must be 64 hexadecimal characters (32 bytes; e.g. "
                         "openssl rand -hex 32)");
    if (rc != EVD_OK)
        evd_config_free(cfg);
    return rc;
}

void evd_config_free(struct evd_config *cfg)
{
    for (size_t i = 0; i < NSETTINGS; i++) {
        if (settings[i].offset == NOFIELD || settings[i].kind == K_INT)
            continue;
        char **f = str_field(cfg, &settings[i]);
        if (*f != NULL && settings[i].kind == K_SECRET)
            explicit_bzero(*f, strlen(*f));
        free(*f);
        *f = NULL;
    }
}

void evd_config_usage(FILE *out)
{
    fprintf(out, "usage: evald [--option value | --option=value]...\n\n"
                 "Every setting comes from its environment variable or its flag (flags win).\n\n");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[i];
        char flag[64];
        if (s->flag)
            snprintf(flag, sizeof(flag), "--%s", s->flag);
        else
            snprintf(flag, sizeof(flag), "(environment only)");
        fprintf(out, "  %-28s %-24s default: %s\n      %s\n", s->env, flag,
                s->def ? s->def : "unset", s->help);
    }
    fprintf(out, "\n  --help, --version\n");
}

long evd_config_workers(const struct evd_config *cfg)
{
    return cfg->workers > 0 ? cfg->workers : cfg->max_concurrency;
}

long evd_config_worker_connections(const struct evd_config *cfg)
{
    long workers = evd_config_workers(cfg);
    return cfg->worker_connections < workers ? cfg->worker_connections : workers;
}

long evd_config_connections(const struct evd_config *cfg, bool iii)
{
    return evd_config_worker_connections(cfg) + cfg->db_pool_size + cfg->webhook_workers + EVD_ENGINE_SERVICE_CONNECTIONS +
           (iii ? 1 : 0);
}
