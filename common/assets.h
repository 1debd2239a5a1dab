/*
 * Files embedded at build time by scripts/embed_assets.cmake: the console
 * (evd_assets), the SQL migrations (evd_migrations), the OpenAPI document
 * (evd_openapi) and the function contract (evd_contract). Each table ends with an entry whose path is NULL. Immutable;
 * thread-safe.
 */
#ifndef EVD_COMMON_ASSETS_H
#define EVD_COMMON_ASSETS_H

#include <stddef.h>

struct evd_asset {
    const char *path;         /* relative to its folder, e.g. "index.html" */
    const char *content_type; /* e.g. "text/html; charset=utf-8" */
    const unsigned char *data;
    size_t len;
};

extern const struct evd_asset evd_assets[];
extern const struct evd_asset evd_migrations[];
extern const struct evd_asset evd_openapi[];
extern const struct evd_asset evd_contract[];

/* Returns the entry of `table` at `path`, or NULL. */
const struct evd_asset *evd_asset_find(const struct evd_asset *table, const char *path);

#endif
