/*
 * Canonical JSON serialization (see canonical.h): common/json.c's writer with object keys
 * sorted. Pure; thread-safe; allocates only the output buffer and a key table.
 */
#include "domain/canonical.h"

#include "common/json.h"

int evd_canonical_append(struct evd_buf *out, const json_t *v)
{
    return evd_json_append(out, v, true);
}

char *evd_canonical_dump(const json_t *v)
{
    struct evd_buf b = {0};
    if (evd_canonical_append(&b, v) != 0) {
        evd_buf_free(&b);
        return NULL;
    }
    return b.data;
}

int evd_canonical_sha256(const json_t *v, char out[65])
{
    struct evd_buf b = {0};
    if (evd_canonical_append(&b, v) != 0) {
        evd_buf_free(&b);
        return -1;
    }
    evd_sha256_hex(b.data, b.len, out);
    evd_buf_free(&b);
    return 0;
}
