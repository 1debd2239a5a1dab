/*
 * evald configuration: one table (server/config.c) of every setting with its
 * environment variable, flag, type, default and help. Precedence: defaults <
 * environment < flags. Validated once at start-up; the struct is read-only after.
 * Secrets (API token, database URL password, secret key) are held here and must never be logged:
 * evd_config_describe() prints them redacted.
 */
#ifndef EVD_SERVER_CONFIG_H
#define EVD_SERVER_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "common/err.h"

struct evd_config {
    char *database_url;      /* EVALD_DATABASE_URL; required to serve */
    char *listen;            /* EVALD_LISTEN, "host:port" or "[v6]:port" */
    char listen_host[256];   /* parsed from listen */
    unsigned listen_port;    /* parsed from listen; 0 = pick a free port */
    bool listen_loopback;    /* listen_host is a loopback address */
    long workers;            /* EVALD_WORKERS */
    long sweep_interval_ms;  /* EVALD_SWEEP_INTERVAL_MS */
    long lease_ms;           /* EVALD_LEASE_MS */
    char *api_token;         /* EVALD_API_TOKEN; NULL = no auth */
    long worker_connections; /* EVALD_WORKER_CONNECTIONS */
    long max_runs;           /* EVALD_MAX_RUNS */
    long max_concurrency;    /* EVALD_MAX_CONCURRENCY */
    long max_experiment_runs; /* EVALD_MAX_EXPERIMENT_RUNS */
    long max_dataset_cases;  /* EVALD_MAX_DATASET_CASES */
    long max_dataset_bytes;  /* EVALD_MAX_DATASET_BYTES */
    char *providers_file;    /* EVALD_PROVIDERS_FILE */
    char *prices_file;       /* EVALD_PRICES_FILE */
    long db_pool_size;       /* EVALD_DB_POOL_SIZE */
    long http_threads;       /* EVALD_HTTP_THREADS */
    long http_handlers;      /* EVALD_HTTP_HANDLERS */
    long http_timeout_seconds; /* EVALD_HTTP_TIMEOUT_SECONDS */
    long http_max_connections; /* EVALD_HTTP_MAX_CONNECTIONS */
    long http_max_connections_per_ip; /* EVALD_HTTP_MAX_CONNECTIONS_PER_IP */
    char *log_level;         /* EVALD_LOG_LEVEL */
    char *iii_url;           /* III_URL */
    char *webhook_allow_hosts; /* EVALD_WEBHOOK_ALLOW_HOSTS */
    long webhook_workers;    /* EVALD_WEBHOOK_WORKERS */
    long webhook_backoff_ms; /* EVALD_WEBHOOK_BACKOFF_MS */
    char *secret_key;        /* EVALD_SECRET_KEY; NULL = no webhook subscriptions */
    char *openai_base_url;   /* OPENAI_BASE_URL */
    char *anthropic_base_url; /* ANTHROPIC_BASE_URL */
    bool help;               /* --help given */
    bool version;            /* --version given */
};

/*
 * Fills *cfg from defaults, then `envp`-style lookup through getenv, then argv.
 * Returns EVD_OK or EVD_EINVAL with a message naming the setting (e.g.
 * "EVALD_WORKERS must be an integer between 1 and 256"). On error *cfg is freed.
 * `getenv_fn` lets tests supply an environment; pass NULL for getenv(3).
 * With --help, -h or --version anywhere in argv only cfg->help / cfg->version are set and
 * nothing else is read or validated (EVD_OK whatever the environment holds).
 */
enum evd_code evd_config_load(struct evd_config *cfg, int argc, char **argv,
                              const char *(*getenv_fn)(const char *name), struct evd_err *err);

/* Releases the strings owned by *cfg. */
void evd_config_free(struct evd_config *cfg);

/* Writes the --help text: every setting with its variable, flag, default and meaning. */
void evd_config_usage(FILE *out);

/* True when `host` is a loopback name or address (127.0.0.0/8, ::1, localhost). */
bool evd_config_host_is_loopback(const char *host);

/* The engine's worker threads: EVALD_WORKERS when set, else EVALD_MAX_CONCURRENCY. */
long evd_config_workers(const struct evd_config *cfg);

/*
 * The PostgreSQL connections a process opens at most: the workers' shared connections
 * (EVALD_WORKER_CONNECTIONS, at most one per worker), the pool that the engine's and the
 * webhooks' functions borrow from (for handlers and the adapter), and the service threads
 * that hold one each: the engine's keeper (it LISTENs), sweeper, writer, finalizer, the
 * finalizer's helper and analyst (engine/engine.c, writer.c, steps.c, experiments.c), each
 * webhook delivery thread (webhooks/deliver.c), and the iii adapter's delivery thread when
 * it runs (adapter/deliver.c). At the defaults, 32 whatever EVALD_MAX_CONCURRENCY is.
 */
#define EVD_ENGINE_SERVICE_CONNECTIONS 6
/* The workers' shared connections: EVALD_WORKER_CONNECTIONS, at most one per worker. */
long evd_config_worker_connections(const struct evd_config *cfg);
long evd_config_connections(const struct evd_config *cfg, bool iii);

#endif
