/*
 * evald entry point: parse configuration, initialise libraries before any
 * thread, apply migrations, wire the modules, serve, and shut down gracefully on
 * SIGTERM/SIGINT (stop accepting, finish in-flight requests, exit 0).
 * Exit status: 0 clean stop, 1 runtime failure, 2 invalid configuration.
 */
#include <curl/curl.h>
#include <jansson.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapter/iii.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"
#include "otel/otel.h"
#include "handlers/api.h"
#include "handlers/evaluations.h"
#include "handlers/sessions.h"
#include "handlers/sse.h"
#include "harness/providers.h"
#include "server/config.h"
#include "server/http.h"
#include "server/routes.h"
#include "store/db.h"
#include "webhooks/webhooks.h"

#ifdef EVALD_JEMALLOC
/*
 * jemalloc's settings (CMakeLists.txt), read when it starts; MALLOC_CONF overrides them.
 * Two arenas; small thread caches (objects up to 256 bytes, at most 8 of a size, one of
 * each larger size); freed pages returned after a second. A thread's cache is what costs
 * memory with a thousand threads: with jemalloc's defaults the burst of bench/limits.py
 * (1,024 calls in flight) peaked at 266 MiB and bench/inflight.py (2,400) at 484, with
 * these at 112-119 and 258 (glibc's malloc: 113-117 and 269), at the same speed
 * (docs/engine.md, "Allocator").
 */
const char *malloc_conf = "narenas:2,tcache_max:256,tcache_nslots_small_max:8,"
                          "tcache_nslots_large:1,dirty_decay_ms:1000,muzzy_decay_ms:0";
#endif

#if defined(__GLIBC__) && !defined(EVALD_JEMALLOC)
/* After a large report (evd_memory_trim): glibc keeps the freed top of its arenas. */
static void glibc_trim(void)
{
    malloc_trim(0);
}
#endif

/* Provider settings come from the environment, except the base URLs and the two
 * files, which a flag may also set (flags win). */
/* The process environment, for the OTEL_* variables. */
static const char *otel_env(const char *name)
{
    return getenv(name);
}

static const char *provider_env(void *ctx, const char *name)
{
    const struct evd_config *cfg = ctx;
    if (strcmp(name, "OPENAI_BASE_URL") == 0)
        return cfg->openai_base_url;
    if (strcmp(name, "ANTHROPIC_BASE_URL") == 0)
        return cfg->anthropic_base_url;
    if (strcmp(name, "EVALD_PROVIDERS_FILE") == 0)
        return cfg->providers_file;
    if (strcmp(name, "EVALD_PRICES_FILE") == 0)
        return cfg->prices_file;
    return getenv(name);
}

/* The database may still be starting (e.g. docker-compose): retry this long. */
#define MIGRATE_PATIENCE_MS 30000

static enum evd_code migrate_with_retry(const char *url, struct evd_err *err)
{
    int64_t deadline = evd_mono_ms() + MIGRATE_PATIENCE_MS;
    for (;;) {
        enum evd_code rc = evd_db_migrate(url, err);
        if (rc != EVD_EDB || evd_mono_ms() > deadline)
            return rc;
        evd_log(EVD_LOG_WARN, "database not reachable yet, retrying", "error", err->msg, NULL);
        usleep(500 * 1000);
    }
}


/* Refuses a configuration that the server cannot serve: it would never become ready.
 * Returns false (and logs the reason) only when the server answered and it does not fit. */
static bool connections_fit(const struct evd_config *cfg, bool iii)
{
    struct evd_err err = {0};
    struct evd_db_capacity cap;
    if (evd_db_capacity(cfg->database_url, &cap, &err) != EVD_OK) {
        evd_log(EVD_LOG_WARN, "could not ask the database how many connections it allows",
                "error", err.msg, NULL);
        return true;
    }
    long services = EVD_ENGINE_SERVICE_CONNECTIONS + (iii ? 1 : 0);
    long wconns = evd_config_worker_connections(cfg);
    long need = evd_config_connections(cfg, iii);
    long allowed = cap.max_connections - cap.reserved - cap.in_use;
    if (need <= allowed)
        return true;
    char msg[400];
    snprintf(msg, sizeof(msg),
             "EVALD_WORKER_CONNECTIONS (%ld) + EVALD_DB_POOL_SIZE (%ld) + "
             "EVALD_WEBHOOK_WORKERS (%ld) + %ld service connections = %ld exceed what "
             "PostgreSQL allows this process (max_connections %ld - %ld reserved - %ld in use "
             "= %ld)",
             wconns, cfg->db_pool_size, cfg->webhook_workers, services, need,
             cap.max_connections, cap.reserved, cap.in_use, allowed);
    evd_log(EVD_LOG_ERROR, "invalid configuration", "error", msg, NULL);
    return false;
}

int main(int argc, char **argv)
{
    int status = 1;
    struct evd_config cfg;
    struct evd_err err = {0};
    struct evd_db *db = NULL;
    struct evd_http *http = NULL;
    struct evd_providers *providers = NULL;
    struct evd_engine *engine = NULL;
    struct evd_webhooks *webhooks = NULL;
    struct evd_sse_hub *sse = NULL;
    struct evd_iii *iii = NULL;

    if (evd_config_load(&cfg, argc, argv, NULL, &err) != EVD_OK) {
        evd_log(EVD_LOG_ERROR, "invalid configuration", "error", err.msg, NULL);
        return 2;
    }
    if (cfg.help) {
        evd_config_usage(stdout);
        evd_config_free(&cfg);
        return 0;
    }
    if (cfg.version) {
        puts("evald " EVALD_VERSION);
        evd_config_free(&cfg);
        return 0;
    }
    if (cfg.database_url == NULL) {
        evd_log(EVD_LOG_ERROR, "invalid configuration", "error",
                "EVALD_DATABASE_URL must be set (make run starts a private PostgreSQL and sets it)",
                NULL);
        evd_config_free(&cfg);
        return 2;
    }
    evd_log_set_level((enum evd_log_level)evd_log_level_parse(cfg.log_level));
    /* The standard OTEL_* variables (docs/otel.md): refused before anything runs. */
    struct evd_otel_config otel = {0};
    if (evd_otel_config_read(otel_env, &otel, &err) != EVD_OK) {
        evd_log(EVD_LOG_ERROR, "invalid configuration", "error", err.msg, NULL);
        evd_config_free(&cfg);
        return 2;
    }
    if (cfg.iii_url != NULL) {
        /* Validated before anything runs; created before the engine (which calls iii
         * functions through it), started after it (the adapter calls the eval functions). */
        struct evd_iii_options iopts = {.url = cfg.iii_url, .conninfo = cfg.database_url};
        iii = evd_iii_new(&iopts, &err);
        if (iii == NULL) {
            evd_log(EVD_LOG_ERROR, "invalid configuration", "error", err.msg, NULL);
            evd_otel_config_free(&otel);
            evd_config_free(&cfg);
            return 2;
        }
    }

    /* Library initialisation, before any thread exists. */
#if defined(__GLIBC__) && !defined(EVALD_JEMALLOC)
    /* glibc gives up to 8 malloc arenas per core, and a thread's arena keeps the pages of
     * what it freed at its top (malloc_trim does not return those of a thread's arena):
     * every worker that once built a report kept megabytes. With two arenas, and large
     * buffers (report texts, libpq results) always in their own mappings, returned on
     * free, workload 1's peak RSS went from 22-38 MiB to 22-27 at C = 4, and the
     * throughput did not move beyond the machine's noise (bench/RESULTS.md). */
    mallopt(M_ARENA_MAX, 2);
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    evd_memory_trim_hook(glibc_trim);
#endif
    json_object_seed(0);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL); /* inherited by every thread */

    /* The span exporter before the workers (they submit spans), stopped after them. */
    if (evd_otel_start(&otel, &err) != EVD_OK) {
        evd_log(EVD_LOG_ERROR, "could not start the span exporter", "error", err.msg, NULL);
        goto out;
    }
    if (otel.enabled)
        evd_log(EVD_LOG_INFO, "exporting traces", "protocol",
                otel.protocol == EVD_OTEL_HTTP_PROTOBUF ? "http/protobuf" : "http/json",
                "capture_content", otel.capture_content ? "true" : "false", NULL);
    if (migrate_with_retry(cfg.database_url, &err) != EVD_OK) {
        evd_log(EVD_LOG_ERROR, "could not apply migrations", "error", err.msg, NULL);
        goto out;
    }
    if (!connections_fit(&cfg, iii != NULL)) {
        status = 2;
        goto out;
    }
    if (evd_providers_load(provider_env, &cfg, &providers, &err) != EVD_OK) {
        evd_log(EVD_LOG_ERROR, "could not load providers", "error", err.msg, NULL);
        status = 2;
        goto out;
    }
    db = evd_db_open(cfg.database_url, (int)cfg.db_pool_size, &err);
    if (db == NULL) {
        evd_log(EVD_LOG_ERROR, "could not open the database pool", "error", err.msg, NULL);
        goto out;
    }
    struct evd_engine_options eopts = {
        .conninfo = cfg.database_url,
        .db = db,
        .providers = providers,
        .workers = evd_config_workers(&cfg),
        .worker_connections = cfg.worker_connections,
        .lease_ms = cfg.lease_ms,
        .sweep_interval_ms = cfg.sweep_interval_ms,
        .max_runs = cfg.max_runs,
        .max_concurrency = cfg.max_concurrency,
        .max_experiment_runs = cfg.max_experiment_runs,
        .max_dataset_cases = cfg.max_dataset_cases,
        .remote = iii ? evd_iii_remote(iii) : NULL,
    };
    engine = evd_engine_start(&eopts, &err);
    if (engine == NULL) {
        evd_log(EVD_LOG_ERROR, "could not start the engine", "error", err.msg, NULL);
        goto out;
    }
    struct evd_webhooks_options wopts = {
        .conninfo = cfg.database_url,
        .db = db,
        .allow_hosts = cfg.webhook_allow_hosts,
        .secret_key = cfg.secret_key,
        .workers = cfg.webhook_workers,
        .backoff_ms = cfg.webhook_backoff_ms,
    };
    webhooks = evd_webhooks_start(&wopts, &err);
    if (webhooks == NULL) {
        evd_log(EVD_LOG_ERROR, "could not start webhooks", "error", err.msg, NULL);
        status = err.code == EVD_EINVAL ? 2 : 1;
        goto out;
    }
    sse = evd_sse_hub_start(engine, &err);
    if (sse == NULL) {
        evd_log(EVD_LOG_ERROR, "could not start the event streams", "error", err.msg, NULL);
        goto out;
    }
    evd_evaluations_register();
    evd_sessions_register();
    struct evd_ctx ctx = {
        .max_runs = cfg.max_runs,
        .max_dataset_cases = cfg.max_dataset_cases,
        .max_dataset_bytes = cfg.max_dataset_bytes,
        .version = EVALD_VERSION,
        .started_at_ms = evd_now_ms(),
        .engine = engine,
        .webhooks = webhooks,
        .sse = sse,
    };
    struct evd_http_options hopts = {
        .host = cfg.listen_host,
        .port = cfg.listen_port,
        .routes = evd_routes,
        .nroutes = evd_nroutes,
        .ctx = &ctx,
        .api_token = cfg.api_token,
        .threads = (unsigned)cfg.http_threads,
        .timeout_seconds = (unsigned)cfg.http_timeout_seconds,
        .max_connections = (unsigned)cfg.http_max_connections,
        .max_connections_per_ip = (unsigned)cfg.http_max_connections_per_ip,
        .handler_threads = (unsigned)cfg.http_handlers,
    };
    http = evd_http_start(&hopts, &err);
    if (http == NULL) {
        evd_log(EVD_LOG_ERROR, "could not start the HTTP server", "error", err.msg, NULL);
        goto out;
    }
    if (iii != NULL && evd_iii_start(iii, &ctx, &err) != EVD_OK) {
        evd_log(EVD_LOG_ERROR, "could not start the iii adapter", "error", err.msg, NULL);
        goto out;
    }
    char addr[300], port[8];
    snprintf(port, sizeof(port), "%u", evd_http_port(http));
    snprintf(addr, sizeof(addr), strchr(cfg.listen_host, ':') ? "[%s]:%s" : "%s:%s",
             cfg.listen_host, port);
    evd_log(EVD_LOG_INFO, "listening", "listen", addr, "auth", cfg.api_token ? "bearer" : "none",
            NULL);
    printf("{\"listen\":\"%s\"}\n", addr);
    fflush(stdout);

    int sig = 0;
    sigwait(&stop_signals, &sig);
    evd_log(EVD_LOG_INFO, "shutting down", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT", NULL);
    evd_http_quiesce(http);
    /* The iii adapter takes no new invocation and closes its session once the ones in
     * flight are answered. Streams (SSE) end when the engine says it is stopping; then
     * in-flight requests finish, then workers hand their runs back. */
    evd_iii_signal_stop(iii);
    evd_engine_signal_stop(engine);
    evd_webhooks_signal_stop(webhooks);
    if (!evd_http_drain(http, 10000))
        evd_log(EVD_LOG_WARN, "requests still in flight after 10 s; closing them", NULL);
    status = 0;
out:
    evd_iii_signal_stop(iii);
    evd_http_stop(http);
    evd_sse_hub_stop(sse); /* after the server: every stream is released */
    evd_webhooks_stop(webhooks);
    evd_iii_stop(iii);
    evd_engine_stop(engine);
    evd_otel_stop(); /* after the workers: their last spans are flushed */
    evd_otel_config_free(&otel);
    evd_iii_free(iii); /* engine workers no longer call it */
    evd_db_close(db);
    evd_providers_free(providers);
    evd_config_free(&cfg);
    curl_global_cleanup();
    if (status == 0)
        evd_log(EVD_LOG_INFO, "stopped", NULL);
    return status;
}
