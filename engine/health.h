/*
 * What the operational endpoints ask of the process: readiness (the database answers and
 * is migrated) and the Prometheus page (the counters of common/prometheus.h, the pool's
 * figures and the provider rate limiters'). Thread-safe; callable from any thread.
 */
#ifndef EVD_ENGINE_HEALTH_H
#define EVD_ENGINE_HEALTH_H

#include "common/err.h"
#include "common/util.h"

struct evd_engine;

/* evd_db_ready on the engine's pool: EVD_OK when the database answers and every embedded
 * migration is applied, EVD_EUNAVAIL when migrations are pending (or no connection came
 * free within 5 s), else why it could not be asked. */
enum evd_code evd_engine_ready(struct evd_engine *e, struct evd_err *err);
/* Appends the metrics page to `out`: 0, or -1 when out of memory. */
int evd_engine_metrics_render(struct evd_engine *e, struct evd_buf *out);

#endif
