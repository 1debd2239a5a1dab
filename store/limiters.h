/*
 * SQL of the split of provider limits between the processes of a database
 * (migrations/0018): each process trades what it asks of each limit it knows for what the
 * others ask (harness/ratelimit.h, evd_rl_part).
 */
#ifndef EVD_STORE_LIMITERS_H
#define EVD_STORE_LIMITERS_H

#include <stddef.h>

#include "common/err.h"
#include "store/db.h"

/* What one process asks of the limit of provider/model (borrowed strings). */
struct evd_store_demand {
    const char *provider;
    const char *model;
    int demand;
};

/* For each demand traded: the demands of the other processes, others[0..n). */
typedef void (*evd_store_demand_fn)(void *arg, const char *provider, const char *model,
                                    const int *others, size_t n);

/*
 * Records `owner`'s demands[0..n) and calls fn for each of them with the demands that
 * other processes reported within fresh_ms (those with some); one statement
 * (evald_limiter_exchange), committed asynchronously. Nothing is called on failure.
 */
enum evd_code evd_store_limiter_exchange(PGconn *c, const char *owner,
                                         const struct evd_store_demand *demands, size_t n,
                                         int fresh_ms, evd_store_demand_fn fn, void *arg,
                                         struct evd_err *err);

#endif
