/*
 * Console assets embedded at build time by scripts/embed_assets.cmake.
 * The table ends with an entry whose path is NULL. Immutable; thread-safe.
 */
#ifndef EVD_SERVER_ASSETS_H
#define EVD_SERVER_ASSETS_H

#include <stddef.h>

struct evd_asset {
    const char *path;         /* relative to console/, e.g. "index.html" */
    const char *content_type; /* e.g. "text/html; charset=utf-8" */
    const unsigned char *data;
    size_t len;
};

extern const struct evd_asset evd_assets[];

/* Returns the asset at `path`, or NULL. */
const struct evd_asset *evd_asset_find(const char *path);

#endif
