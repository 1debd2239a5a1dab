/* Lookup over the generated, immutable asset tables. */
#include "common/assets.h"

#include <string.h>

const struct evd_asset *evd_asset_find(const struct evd_asset *table, const char *path)
{
    for (const struct evd_asset *a = table; a->path != NULL; a++)
        if (strcmp(a->path, path) == 0)
            return a;
    return NULL;
}
