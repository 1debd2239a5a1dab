/* See json.h. */
#include "common/json.h"

#include <stdbool.h>
#include <string.h>

const char *evd_json_unknown_member(const json_t *obj, const char *const *known)
{
    for (void *it = json_object_iter((json_t *)obj); it != NULL;
         it = json_object_iter_next((json_t *)obj, it)) {
        const char *key = json_object_iter_key(it);
        size_t len = json_object_iter_key_len(it);
        bool found = false;
        for (const char *const *k = known; *k != NULL && !found; k++)
            found = strlen(*k) == len && memcmp(*k, key, len) == 0;
        if (!found)
            return key;
    }
    return NULL;
}
