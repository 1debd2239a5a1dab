/* SQL of the split of provider limits between processes; see limiters.h. */
#include "store/limiters.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

/* Most other processes counted for one limit (a sum past these is enough to split by). */
#define OTHERS_MAX 256

/* The integers of an int[] in PostgreSQL's text form ("{3,0,12}") into out[0..max). */
static size_t int_array(const char *text, int *out, size_t max)
{
    size_t n = 0;
    const char *p = text;
    if (*p == '{')
        p++;
    while (*p != '\0' && *p != '}' && n < max) {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

enum evd_code evd_store_limiter_exchange(PGconn *c, const char *owner,
                                         const struct evd_store_demand *demands, size_t n,
                                         int fresh_ms, evd_store_demand_fn fn, void *arg,
                                         struct evd_err *err)
{
    json_t *array = json_array();
    for (size_t i = 0; array != NULL && i < n; i++) {
        json_t *o = json_pack("{s:s, s:s, s:i}", "provider", demands[i].provider, "model",
                              demands[i].model, "demand", demands[i].demand);
        if (o == NULL || json_array_append_new(array, o) != 0) {
            json_decref(array);
            array = NULL;
        }
    }
    char *text = array != NULL ? evd_json_compact(array, NULL) : NULL;
    json_decref(array);
    if (text == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    char fresh[16];
    snprintf(fresh, sizeof(fresh), "%d", fresh_ms);
    const char *p[] = {owner, text, fresh};
    PGresult *r = evd_db_query(
        c, "SELECT * FROM evald_limiter_exchange($1, $2::jsonb, $3::int)", 3, p, err);
    free(text);
    if (r == NULL)
        return evd_db_code(err);
    int others[OTHERS_MAX];
    for (int i = 0; i < PQntuples(r); i++) {
        size_t k = int_array(PQgetvalue(r, i, 2), others, OTHERS_MAX);
        fn(arg, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), others, k);
    }
    PQclear(r);
    return EVD_OK;
}
