/* Lookup over the generated, immutable asset table. */
#include "server/assets.h"

#include <string.h>

const struct evd_asset *evd_asset_find(const char *path)
{
    for (const struct evd_asset *a = evd_assets; a->path != NULL; a++)
        if (strcmp(a->path, path) == 0)
            return a;
    return NULL;
}
