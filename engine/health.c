/* Readiness and the metrics page; see health.h. Reads only shared, thread-safe state. */
#include "engine/health.h"

#include "common/prometheus.h"
#include "engine/internal.h"
#include "harness/harness.h"
#include "otel/otel.h"
#include "store/db.h"

enum evd_code evd_engine_ready(struct evd_engine *e, struct evd_err *err)
{
    return evd_db_ready(e->opts.db, err);
}

int evd_engine_metrics_render(struct evd_engine *e, struct evd_buf *out)
{
    int size = 0, in_use = 0, open = 0;
    evd_db_stats(e->opts.db, &size, &in_use, &open);
    evd_metrics_gauge("evald_db_pool_size", size);
    evd_metrics_gauge("evald_db_pool_in_use", in_use);
    evd_metrics_gauge("evald_db_pool_open", open);
    if (evd_metrics_render(out) != 0 || evd_hx_limiter_render(out) != 0 ||
        evd_otel_render_metrics(out) != 0)
        return -1;
    return 0;
}
