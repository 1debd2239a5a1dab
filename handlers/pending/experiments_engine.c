/*
 * Placeholder definitions of engine/experiments.h, linked only while the engine does not
 * define them yet (CMakeLists.txt looks for the definition of evd_experiment_start in engine/):
 * every call answers 503 "experiments are not available yet", so that the routes, the OpenAPI
 * document and the tests can be built before the engine. Remove with the engine's arrival.
 */
#include "engine/experiments.h"

#define PENDING(err) evd_err_set((err), EVD_EUNAVAIL, "experiments are not available yet")

enum evd_code evd_experiment_start(struct evd_engine *e, const json_t *body, json_t **response,
                                   struct evd_err *err)
{
    (void)e, (void)body, (void)response;
    return PENDING(err);
}

enum evd_code evd_experiment_get(struct evd_engine *e, const char *id, json_t **experiment,
                                 struct evd_err *err)
{
    (void)e, (void)id, (void)experiment;
    return PENDING(err);
}

enum evd_code evd_experiment_progress(struct evd_engine *e, const char *id, json_t **progress,
                                      struct evd_err *err)
{
    (void)e, (void)id, (void)progress;
    return PENDING(err);
}

enum evd_code evd_experiment_list(struct evd_engine *e, unsigned limit, const char *before,
                                  json_t **response, struct evd_err *err)
{
    (void)e, (void)limit, (void)before, (void)response;
    return PENDING(err);
}

enum evd_code evd_experiment_cases(struct evd_engine *e, const char *id, const char *filter,
                                   unsigned limit, const char *before, json_t **response,
                                   struct evd_err *err)
{
    (void)e, (void)id, (void)filter, (void)limit, (void)before, (void)response;
    return PENDING(err);
}

enum evd_code evd_experiment_runs(struct evd_engine *e, const char *id, const char *case_id,
                                  unsigned limit, const char *before, json_t **response,
                                  struct evd_err *err)
{
    (void)e, (void)id, (void)case_id, (void)limit, (void)before, (void)response;
    return PENDING(err);
}

enum evd_code evd_experiment_cancel(struct evd_engine *e, const char *id, json_t **response,
                                    struct evd_err *err)
{
    (void)e, (void)id, (void)response;
    return PENDING(err);
}

enum evd_code evd_experiment_delete(struct evd_engine *e, const char *id, struct evd_err *err)
{
    (void)e, (void)id;
    return PENDING(err);
}

enum evd_code evd_experiment_export_open(struct evd_engine *e, const char *id, const char *format,
                                         struct evd_experiment_export **out, struct evd_err *err)
{
    (void)e, (void)id, (void)format;
    *out = NULL;
    return PENDING(err);
}

int evd_experiment_export_next(struct evd_experiment_export *x, struct evd_buf *out,
                               struct evd_err *err)
{
    (void)x, (void)out;
    PENDING(err);
    return -1;
}

const char *evd_experiment_export_type(const struct evd_experiment_export *x)
{
    (void)x;
    return "application/x-ndjson";
}

void evd_experiment_export_free(struct evd_experiment_export *x)
{
    (void)x;
}
