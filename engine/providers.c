/*
 * The providers as the API shows them: the registry's configuration (harness/providers.h,
 * immutable) joined with what this process's rate limiters show now (evd_hx_limiter_view,
 * a snapshot taken under the limiters' own locks). Safe from any thread; nothing here
 * touches the database.
 */
#include <string.h>

#include "engine/internal.h"
#include "harness/providers.h"

/* The limiter entry of provider/model in view (borrowed), or NULL. */
static json_t *find_limiter(json_t *view, const char *provider, const char *model)
{
    size_t i;
    json_t *l;
    json_array_foreach(view, i, l)
    {
        const char *p = json_string_value(json_object_get(l, "provider"));
        const char *m = json_string_value(json_object_get(l, "model"));
        if (p != NULL && m != NULL && strcmp(p, provider) == 0 && strcmp(m, model) == 0)
            return l;
    }
    return NULL;
}

/* A copy of limiter entry l without the members named (new reference). */
static json_t *limiter_without(json_t *l, const char *drop1, const char *drop2)
{
    json_t *c = json_copy(l);
    if (c != NULL) {
        json_object_del(c, drop1);
        if (drop2 != NULL)
            json_object_del(c, drop2);
    }
    return c;
}

json_t *evd_engine_models(struct evd_engine *e)
{
    json_t *models = evd_providers_list_models(e->opts.providers);
    json_t *view = evd_hx_limiter_view();
    size_t i;
    json_t *m;
    json_array_foreach(models, i, m)
    {
        const char *p = json_string_value(json_object_get(m, "provider"));
        const char *id = json_string_value(json_object_get(m, "model"));
        json_t *l = p != NULL && id != NULL ? find_limiter(view, p, id) : NULL;
        /* Without memory for the view, no entry claims a limiter it may have. */
        json_object_set_new(m, "rate_limit",
                            l != NULL ? limiter_without(l, "provider", "model") : json_null());
    }
    json_decref(view);
    return json_pack("{s:o}", "models", models ? models : json_array());
}

json_t *evd_engine_providers(struct evd_engine *e)
{
    json_t *providers = evd_providers_list(e->opts.providers);
    json_t *view = evd_hx_limiter_view();
    json_t *out = NULL;
    if (providers == NULL || view == NULL)
        goto out;
    size_t i;
    json_t *pr;
    json_array_foreach(providers, i, pr)
    {
        const char *name = json_string_value(json_object_get(pr, "name"));
        json_t *models = json_array();
        size_t k;
        json_t *l;
        json_array_foreach(view, k, l)
        {
            const char *p = json_string_value(json_object_get(l, "provider"));
            if (models != NULL && name != NULL && p != NULL && strcmp(p, name) == 0 &&
                json_array_append_new(models, limiter_without(l, "provider", NULL)) != 0) {
                json_decref(models);
                models = NULL;
            }
        }
        if (models == NULL || json_object_set_new(pr, "models", models) != 0)
            goto out;
    }
    out = json_pack("{s:O}", "providers", providers);
out:
    json_decref(providers);
    json_decref(view);
    return out;
}
