/*
 * Provider registry and price table; see providers.h. Built once by evd_providers_load and
 * immutable afterwards, so readers need no lock. Owns copies of every string it keeps,
 * including API keys, which are wiped before the memory is freed.
 */
#include "harness/providers.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROVIDERS 32
#define MAX_MODELS 512

struct model_entry {
    char *provider; /* provider name */
    char *model;
    struct evd_price price;
};

struct model_rate {
    char *model;
    double rpm, tpm;
};

struct evd_provider {
    char *name;
    enum evd_provider_kind kind;
    char *base_url;
    char *api_key;        /* NULL when not set */
    char *api_key_env;    /* NULL for keyless servers */
    bool enforces_format; /* built-in: the structured-output format is enforced */
    double rpm, tpm;      /* configured rate limits of every model; 0 = none */
    struct model_rate *rates; /* per-model limits, which win over the provider's */
    size_t nrates;
};

struct evd_providers {
    struct evd_provider providers[MAX_PROVIDERS];
    size_t nproviders;
    struct model_entry models[MAX_MODELS]; /* later entries override earlier ones */
    size_t nmodels;
};

static const char *kind_names[] = {"openai-responses", "anthropic-messages", "openai-chat"};

const char *evd_provider_kind_name(enum evd_provider_kind k)
{
    return kind_names[k];
}

int evd_provider_kind_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (s != NULL && strcmp(s, kind_names[i]) == 0)
            return i;
    return -1;
}

const char *evd_provider_name(const struct evd_provider *pr)
{
    return pr->name;
}

enum evd_provider_kind evd_provider_kind(const struct evd_provider *pr)
{
    return pr->kind;
}

const char *evd_provider_base_url(const struct evd_provider *pr)
{
    return pr->base_url;
}

const char *evd_provider_api_key(const struct evd_provider *pr)
{
    return pr->api_key;
}

const char *evd_provider_key_env(const struct evd_provider *pr)
{
    return pr->api_key_env;
}

bool evd_provider_enforces_format(const struct evd_provider *pr)
{
    return pr->enforces_format;
}

bool evd_provider_available(const struct evd_provider *pr)
{
    if (pr->api_key != NULL && pr->api_key[0] != '\0')
        return true;
    /* A providers-file entry without api_key_env is a server that takes no key, whatever
     * its wire kind; the built-in providers always name their variable. */
    return pr->api_key_env == NULL;
}

static void wipe_free(char *s)
{
    if (s == NULL)
        return;
    volatile char *v = s;
    while (*v != '\0')
        *v++ = '\0';
    free(s);
}

static void free_rates(struct evd_provider *pr)
{
    for (size_t i = 0; i < pr->nrates; i++)
        free(pr->rates[i].model);
    free(pr->rates);
    pr->rates = NULL;
    pr->nrates = 0;
}

void evd_provider_rate(const struct evd_provider *pr, const char *model, double *rpm,
                       double *tpm)
{
    *rpm = pr->rpm;
    *tpm = pr->tpm;
    for (size_t i = 0; model != NULL && i < pr->nrates; i++)
        if (strcmp(pr->rates[i].model, model) == 0) {
            if (pr->rates[i].rpm > 0)
                *rpm = pr->rates[i].rpm;
            if (pr->rates[i].tpm > 0)
                *tpm = pr->rates[i].tpm;
        }
}

/* Reads the optional rpm and tpm of object o (0 when absent); `where` names it. */
static enum evd_code read_rate(json_t *o, const char *src, const char *where, double *rpm,
                               double *tpm, struct evd_err *err)
{
    static const char *names[] = {"rpm", "tpm"};
    double *outs[] = {rpm, tpm};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(o, names[i]);
        *outs[i] = 0;
        if (v == NULL || json_is_null(v))
            continue;
        if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > 1e9)
            return evd_err_set(err, EVD_EINVAL,
                               "%s: %s.%s must be a positive number (per minute, at most 1e9)",
                               src, where, names[i]);
        *outs[i] = json_number_value(v);
    }
    return EVD_OK;
}

void evd_providers_free(struct evd_providers *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->nproviders; i++) {
        free(p->providers[i].name);
        free(p->providers[i].base_url);
        wipe_free(p->providers[i].api_key);
        free(p->providers[i].api_key_env);
        free_rates(&p->providers[i]);
    }
    for (size_t i = 0; i < p->nmodels; i++) {
        free(p->models[i].provider);
        free(p->models[i].model);
    }
    free(p);
}

static const char *std_env(void *ctx, const char *name)
{
    (void)ctx;
    return getenv(name);
}

static char *dup_trim_slash(const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        return NULL;
    size_t n = strlen(d);
    while (n > 0 && d[n - 1] == '/')
        d[--n] = '\0';
    return d;
}

static struct evd_provider *find_provider(const struct evd_providers *p, const char *name)
{
    for (size_t i = 0; i < p->nproviders; i++)
        if (strcmp(p->providers[i].name, name) == 0)
            return (struct evd_provider *)&p->providers[i];
    return NULL;
}

/* Adds or replaces a provider. The key is read from key_env now and copied. */
static enum evd_code put_provider(struct evd_providers *p, const char *name,
                                  enum evd_provider_kind kind, const char *base_url,
                                  const char *key_env, evd_env_fn env, void *env_ctx,
                                  struct evd_err *err)
{
    struct evd_provider *pr = find_provider(p, name);
    if (pr == NULL) {
        if (p->nproviders == MAX_PROVIDERS)
            return evd_err_set(err, EVD_EINVAL, "too many providers (at most %d)", MAX_PROVIDERS);
        pr = &p->providers[p->nproviders++];
        memset(pr, 0, sizeof(*pr));
    } else {
        free(pr->name);
        free(pr->base_url);
        wipe_free(pr->api_key);
        free(pr->api_key_env);
        free_rates(pr);
        memset(pr, 0, sizeof(*pr));
    }
    const char *key = key_env != NULL ? env(env_ctx, key_env) : NULL;
    pr->kind = kind;
    pr->name = strdup(name);
    pr->base_url = dup_trim_slash(base_url);
    pr->api_key_env = key_env != NULL ? strdup(key_env) : NULL;
    pr->api_key = key != NULL && key[0] != '\0' ? strdup(key) : NULL;
    if (pr->name == NULL || pr->base_url == NULL || (key_env != NULL && !pr->api_key_env) ||
        (key != NULL && key[0] != '\0' && pr->api_key == NULL))
        return evd_err_set(err, EVD_ENOMEM, "out of memory loading providers");
    return EVD_OK;
}

static enum evd_code put_price(struct evd_providers *p, const char *provider, const char *model,
                               const struct evd_price *price, struct evd_err *err)
{
    for (size_t i = 0; i < p->nmodels; i++) {
        if (strcmp(p->models[i].provider, provider) == 0 &&
            strcmp(p->models[i].model, model) == 0) {
            p->models[i].price = *price;
            return EVD_OK;
        }
    }
    if (p->nmodels == MAX_MODELS)
        return evd_err_set(err, EVD_EINVAL, "too many priced models (at most %d)", MAX_MODELS);
    struct model_entry *m = &p->models[p->nmodels];
    m->provider = strdup(provider);
    m->model = strdup(model);
    m->price = *price;
    if (m->provider == NULL || m->model == NULL) {
        free(m->provider);
        free(m->model);
        return evd_err_set(err, EVD_ENOMEM, "out of memory loading prices");
    }
    p->nmodels++;
    return EVD_OK;
}

/* Reads one price object; `where` names it in messages (e.g. "prices[3]"). */
static enum evd_code read_price(json_t *o, const char *src, const char *where,
                                struct evd_price *out, bool require, struct evd_err *err)
{
    static const char *fields[] = {"input_usd_per_mtok", "cached_input_usd_per_mtok",
                                   "cache_write_usd_per_mtok", "output_usd_per_mtok"};
    double v[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; i++) {
        json_t *f = json_object_get(o, fields[i]);
        if (f == NULL || json_is_null(f))
            continue;
        if (!json_is_number(f) || json_number_value(f) < 0)
            return evd_err_set(err, EVD_EINVAL, "%s: %s.%s must be a non-negative number", src,
                               where, fields[i]);
        v[i] = json_number_value(f);
    }
    if (v[0] < 0 || v[3] < 0) {
        if (!require && v[0] < 0 && v[1] < 0 && v[2] < 0 && v[3] < 0)
            return EVD_ENOTFOUND; /* no price given: fine for a provider's model list */
        return evd_err_set(err, EVD_EINVAL, "%s: %s.%s is required", src, where,
                           v[0] < 0 ? fields[0] : fields[3]);
    }
    out->input_usd_per_mtok = v[0];
    out->cached_input_usd_per_mtok = v[1] >= 0 ? v[1] : v[0];
    out->cache_write_usd_per_mtok = v[2] >= 0 ? v[2] : v[0];
    out->output_usd_per_mtok = v[3];
    return EVD_OK;
}

/* Loads a price document {"prices":[{providers[], model, …}]} (borrowed). */
static enum evd_code load_prices(struct evd_providers *p, json_t *doc, const char *src,
                                 struct evd_err *err)
{
    json_t *arr = json_object_get(doc, "prices");
    if (!json_is_array(arr))
        return evd_err_set(err, EVD_EINVAL, "%s: prices must be an array", src);
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        char where[48];
        snprintf(where, sizeof(where), "prices[%zu]", i);
        const char *model = json_string_value(json_object_get(e, "model"));
        json_t *provs = json_object_get(e, "providers");
        if (!json_is_object(e) || model == NULL || model[0] == '\0')
            return evd_err_set(err, EVD_EINVAL, "%s: %s.model must be a non-empty string", src,
                               where);
        if (!json_is_array(provs) || json_array_size(provs) == 0)
            return evd_err_set(err, EVD_EINVAL, "%s: %s.providers must be a non-empty array", src,
                               where);
        struct evd_price price;
        enum evd_code rc = read_price(e, src, where, &price, true, err);
        if (rc != EVD_OK)
            return rc;
        size_t j;
        json_t *pn;
        json_array_foreach(provs, j, pn)
        {
            if (!json_is_string(pn))
                return evd_err_set(err, EVD_EINVAL, "%s: %s.providers[%zu] must be a string", src,
                                   where, j);
            if ((rc = put_price(p, json_string_value(pn), model, &price, err)) != EVD_OK)
                return rc;
        }
    }
    return EVD_OK;
}

static bool valid_name(const char *s)
{
    if (s == NULL || s[0] == '\0' || strlen(s) > 64)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' && *s != '.')
            return false;
    return true;
}

static bool valid_env_name(const char *s)
{
    if (s == NULL || s[0] == '\0' || isdigit((unsigned char)s[0]))
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

static bool valid_base_url(const char *s)
{
    return s != NULL && (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0) &&
           strlen(s) < 1024;
}

static enum evd_code load_providers_file(struct evd_providers *p, json_t *doc, const char *src,
                                         evd_env_fn env, void *env_ctx, struct evd_err *err)
{
    json_t *arr = json_object_get(doc, "providers");
    if (!json_is_array(arr))
        return evd_err_set(err, EVD_EINVAL, "%s: providers must be an array", src);
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        if (!json_is_object(e))
            return evd_err_set(err, EVD_EINVAL, "%s: providers[%zu] must be an object", src, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *kind = json_string_value(json_object_get(e, "kind"));
        const char *base = json_string_value(json_object_get(e, "base_url"));
        json_t *key_env_j = json_object_get(e, "api_key_env");
        const char *key_env = json_string_value(key_env_j);
        if (!valid_name(name))
            return evd_err_set(err, EVD_EINVAL,
                               "%s: providers[%zu].name must be 1-64 letters, digits, '-', "
                               "'_' or '.'",
                               src, i);
        int k = evd_provider_kind_parse(kind);
        if (k < 0)
            return evd_err_set(err, EVD_EINVAL,
                               "%s: providers[%zu].kind must be openai-responses, "
                               "anthropic-messages or openai-chat",
                               src, i);
        if (!valid_base_url(base))
            return evd_err_set(err, EVD_EINVAL,
                               "%s: providers[%zu].base_url must be an http(s) URL", src, i);
        if (key_env_j != NULL && !json_is_null(key_env_j) && !valid_env_name(key_env))
            return evd_err_set(err, EVD_EINVAL,
                               "%s: providers[%zu].api_key_env must be an environment "
                               "variable name",
                               src, i);
        enum evd_code rc =
            put_provider(p, name, (enum evd_provider_kind)k, base, key_env, env, env_ctx, err);
        if (rc != EVD_OK)
            return rc;
        struct evd_provider *pr = find_provider(p, name);
        char pwhere[32];
        snprintf(pwhere, sizeof(pwhere), "providers[%zu]", i);
        if ((rc = read_rate(e, src, pwhere, &pr->rpm, &pr->tpm, err)) != EVD_OK)
            return rc;
        json_t *models = json_object_get(e, "models");
        if (models == NULL || json_is_null(models))
            continue;
        if (!json_is_array(models))
            return evd_err_set(err, EVD_EINVAL, "%s: providers[%zu].models must be an array", src,
                               i);
        size_t j;
        json_t *m;
        json_array_foreach(models, j, m)
        {
            char where[64];
            snprintf(where, sizeof(where), "providers[%zu].models[%zu]", i, j);
            const char *id = json_string_value(json_object_get(m, "id"));
            if (!json_is_object(m) || id == NULL || id[0] == '\0')
                return evd_err_set(err, EVD_EINVAL, "%s: %s.id must be a non-empty string", src,
                                   where);
            double rpm = 0, tpm = 0;
            if ((rc = read_rate(m, src, where, &rpm, &tpm, err)) != EVD_OK)
                return rc;
            if (rpm > 0 || tpm > 0) {
                struct model_rate *nr = realloc(pr->rates, (pr->nrates + 1) * sizeof(*nr));
                if (nr == NULL)
                    return evd_err_set(err, EVD_ENOMEM, "out of memory loading providers");
                pr->rates = nr;
                nr[pr->nrates] = (struct model_rate){strdup(id), rpm, tpm};
                if (nr[pr->nrates].model == NULL)
                    return evd_err_set(err, EVD_ENOMEM, "out of memory loading providers");
                pr->nrates++;
            }
            struct evd_price price = {-1, -1, -1, -1};
            rc = read_price(m, src, where, &price, false, err);
            if (rc == EVD_ENOTFOUND) {
                /* Listed without a price: catalogue entry only (cost stays unknown). */
                price.input_usd_per_mtok = -1;
                rc = EVD_OK;
            }
            if (rc != EVD_OK)
                return rc;
            if ((rc = put_price(p, name, id, &price, err)) != EVD_OK)
                return rc;
        }
    }
    return EVD_OK;
}

static json_t *load_file(const char *path, const char *what, struct evd_err *err)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (doc == NULL) {
        evd_err_set(err, EVD_EINVAL, "%s %s: %s (line %d)", what, path, je.text, je.line);
        return NULL;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        evd_err_set(err, EVD_EINVAL, "%s %s: must be a JSON object", what, path);
        return NULL;
    }
    return doc;
}

enum evd_code evd_providers_load(evd_env_fn env, void *env_ctx, struct evd_providers **out,
                                 struct evd_err *err)
{
    enum evd_code rc = EVD_OK;
    json_t *doc = NULL;
    char src[300];
    *out = NULL;
    if (env == NULL)
        env = std_env;
    struct evd_providers *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory loading providers");

    const char *oa_base = env(env_ctx, "OPENAI_BASE_URL");
    const char *an_base = env(env_ctx, "ANTHROPIC_BASE_URL");
    if (oa_base == NULL || oa_base[0] == '\0')
        oa_base = "https://api.openai.com/v1";
    if (an_base == NULL || an_base[0] == '\0')
        an_base = "https://api.anthropic.com";
    if (!valid_base_url(oa_base)) {
        rc = evd_err_set(err, EVD_EINVAL, "OPENAI_BASE_URL must be an http(s) URL");
        goto out;
    }
    if (!valid_base_url(an_base)) {
        rc = evd_err_set(err, EVD_EINVAL, "ANTHROPIC_BASE_URL must be an http(s) URL");
        goto out;
    }
    if ((rc = put_provider(p, "openai", EVD_KIND_OPENAI_RESPONSES, oa_base, "OPENAI_API_KEY", env,
                           env_ctx, err)) != EVD_OK ||
        (rc = put_provider(p, "openai-codex", EVD_KIND_OPENAI_RESPONSES, oa_base, "OPENAI_API_KEY",
                           env, env_ctx, err)) != EVD_OK ||
        (rc = put_provider(p, "anthropic", EVD_KIND_ANTHROPIC_MESSAGES, an_base,
                           "ANTHROPIC_API_KEY", env, env_ctx, err)) != EVD_OK)
        goto out;
    /* OpenAI and Anthropic enforce a strict json_schema format; a providers-file entry
     * (put later, replacing one of these if it takes its name) promises nothing. */
    for (size_t i = 0; i < p->nproviders; i++)
        p->providers[i].enforces_format = true;

    json_error_t je;
    doc = json_loads(EVD_PRICES_JSON, 0, &je);
    if (doc == NULL) {
        rc = evd_err_set(err, EVD_EINTERNAL, "embedded prices.json: %s", je.text);
        goto out;
    }
    if ((rc = load_prices(p, doc, "embedded prices.json", err)) != EVD_OK)
        goto out;
    json_decref(doc);
    doc = NULL;

    const char *prices_file = env(env_ctx, "EVALD_PRICES_FILE");
    if (prices_file != NULL && prices_file[0] != '\0') {
        snprintf(src, sizeof(src), "EVALD_PRICES_FILE %s", prices_file);
        if ((doc = load_file(prices_file, "EVALD_PRICES_FILE", err)) == NULL) {
            rc = EVD_EINVAL;
            goto out;
        }
        if ((rc = load_prices(p, doc, src, err)) != EVD_OK)
            goto out;
        json_decref(doc);
        doc = NULL;
    }

    const char *prov_file = env(env_ctx, "EVALD_PROVIDERS_FILE");
    if (prov_file != NULL && prov_file[0] != '\0') {
        snprintf(src, sizeof(src), "EVALD_PROVIDERS_FILE %s", prov_file);
        if ((doc = load_file(prov_file, "EVALD_PROVIDERS_FILE", err)) == NULL) {
            rc = EVD_EINVAL;
            goto out;
        }
        if ((rc = load_providers_file(p, doc, src, env, env_ctx, err)) != EVD_OK)
            goto out;
    }
out:
    json_decref(doc);
    if (rc != EVD_OK) {
        evd_providers_free(p);
        return rc;
    }
    *out = p;
    return EVD_OK;
}

/* True when `rest` is a date suffix: "-YYYYMMDD" or "-YYYY-MM-DD". */
static bool is_date_suffix(const char *rest)
{
    if (rest[0] != '-')
        return false;
    rest++;
    size_t n = strlen(rest);
    if (n == 8)
        return strspn(rest, "0123456789") == 8;
    if (n == 10)
        return strspn(rest, "0123456789") == 4 && rest[4] == '-' &&
               strspn(rest + 5, "0123456789") == 2 && rest[7] == '-' &&
               strspn(rest + 8, "0123456789") == 2;
    return false;
}

static const struct model_entry *find_model(const struct evd_providers *p, const char *provider,
                                            const char *model)
{
    const struct model_entry *best = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < p->nmodels; i++) {
        const struct model_entry *m = &p->models[i];
        if (strcmp(m->provider, provider) != 0)
            continue;
        size_t n = strlen(m->model);
        if (strcmp(m->model, model) == 0)
            return m;
        if (strncmp(m->model, model, n) == 0 && is_date_suffix(model + n) && n > best_len) {
            best = m;
            best_len = n;
        }
    }
    return best;
}

bool evd_providers_price(const struct evd_providers *p, const struct evd_provider *provider,
                         const char *model, struct evd_price *out)
{
    if (p == NULL || provider == NULL || model == NULL)
        return false;
    const struct model_entry *m = find_model(p, provider->name, model);
    if (m == NULL || m->price.input_usd_per_mtok < 0)
        return false;
    *out = m->price;
    return true;
}

/* Provider inferred from a bare model name, or NULL. */
static const char *infer_provider(const char *model)
{
    if (strncmp(model, "gpt-", 4) == 0 || strncmp(model, "codex", 5) == 0 ||
        strncmp(model, "chatgpt-", 8) == 0 || (model[0] == 'o' && isdigit((unsigned char)model[1])))
        return "openai";
    if (strncmp(model, "claude-", 7) == 0)
        return "anthropic";
    return NULL;
}

/* Short prefixes people write before a model name, mapped to provider names. */
static const char *prefix_alias(const char *prefix, size_t n)
{
    if (n == 5 && strncmp(prefix, "codex", 5) == 0)
        return "openai-codex";
    return NULL;
}

static void known_names(const struct evd_providers *p, char *buf, size_t bufsz)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < p->nproviders && n < bufsz; i++)
        n += (size_t)snprintf(buf + n, bufsz - n, "%s%s", i ? ", " : "", p->providers[i].name);
}

enum evd_code evd_providers_resolve(const struct evd_providers *p, json_t *model,
                                    struct evd_resolved_model *out, struct evd_err *err)
{
    char names[512];
    memset(out, 0, sizeof(*out));
    const char *name = json_string_value(json_object_get(model, "model"));
    json_t *prov_j = json_object_get(model, "provider");
    if (name == NULL || name[0] == '\0')
        return evd_err_set(err, EVD_EINVAL, "model.model cannot be empty");
    if (prov_j != NULL && !json_is_null(prov_j) && !json_is_string(prov_j))
        return evd_err_set(err, EVD_EINVAL, "model.provider must be a string");
    const char *want = json_string_value(prov_j);
    if (want != NULL && want[0] == '\0')
        want = NULL;

    /* A "provider/" prefix is removed when it names the provider being used. */
    const char *slash = strchr(name, '/');
    const char *bare = name;
    const char *prefix_provider = NULL;
    if (slash != NULL && slash != name && slash[1] != '\0') {
        size_t n = (size_t)(slash - name);
        char pre[65];
        if (n < sizeof(pre)) {
            memcpy(pre, name, n);
            pre[n] = '\0';
            const struct evd_provider *pp = find_provider(p, pre);
            prefix_provider = pp != NULL ? pp->name : prefix_alias(pre, n);
        }
        /* With an explicit other provider the name stays whole ("vendor/model" ids). */
        if (prefix_provider != NULL && (want == NULL || strcmp(want, prefix_provider) == 0))
            bare = slash + 1;
        else
            prefix_provider = NULL;
    }

    const char *chosen = want != NULL ? want : prefix_provider;
    if (chosen == NULL)
        chosen = infer_provider(bare);
    if (chosen == NULL) {
        known_names(p, names, sizeof(names));
        return evd_err_set(err, EVD_EINVAL,
                           "model.provider is required for model \"%.100s\": no provider could "
                           "be inferred from the name (configured: %s)",
                           name, names);
    }
    const struct evd_provider *pr = find_provider(p, chosen);
    if (pr == NULL) {
        known_names(p, names, sizeof(names));
        return evd_err_set(err, EVD_EINVAL,
                           "model.provider \"%.64s\" is not a configured provider (configured: "
                           "%s)",
                           chosen, names);
    }
    if (!evd_provider_available(pr))
        return evd_err_set(err, EVD_EINVAL,
                           "model.provider \"%s\" has no API key: set %s in the environment",
                           pr->name, pr->api_key_env ? pr->api_key_env : "its key variable");
    if (strlen(bare) >= sizeof(out->model_buf))
        return evd_err_set(err, EVD_EINVAL, "model.model is longer than %zu characters",
                           sizeof(out->model_buf) - 1);
    out->provider = pr;
    snprintf(out->model_buf, sizeof(out->model_buf), "%s", bare);
    out->model = out->model_buf;
    return EVD_OK;
}

static int cmp_entries(const void *a, const void *b)
{
    const struct model_entry *x = *(const struct model_entry *const *)a;
    const struct model_entry *y = *(const struct model_entry *const *)b;
    int c = strcmp(x->provider, y->provider);
    return c != 0 ? c : strcmp(x->model, y->model);
}

json_t *evd_providers_list_models(const struct evd_providers *p)
{
    json_t *arr = json_array();
    const struct model_entry *sorted[MAX_MODELS];
    size_t n = 0;
    if (arr == NULL)
        return NULL;
    for (size_t i = 0; i < p->nmodels; i++)
        if (find_provider(p, p->models[i].provider) != NULL)
            sorted[n++] = &p->models[i];
    qsort(sorted, n, sizeof(sorted[0]), cmp_entries);
    for (size_t i = 0; i < n; i++) {
        const struct model_entry *m = sorted[i];
        const struct evd_provider *pr = find_provider(p, m->provider);
        json_t *pricing = json_null();
        if (m->price.input_usd_per_mtok >= 0)
            pricing =
                json_pack("{s:f,s:f,s:f,s:f}", "input_usd_per_mtok", m->price.input_usd_per_mtok,
                          "cached_input_usd_per_mtok", m->price.cached_input_usd_per_mtok,
                          "cache_write_usd_per_mtok", m->price.cache_write_usd_per_mtok,
                          "output_usd_per_mtok", m->price.output_usd_per_mtok);
        json_t *e = json_pack("{s:s,s:s,s:s,s:b,s:o*}", "provider", pr->name, "kind",
                              kind_names[pr->kind], "model", m->model, "available",
                              evd_provider_available(pr), "pricing", pricing);
        if (e == NULL || json_array_append_new(arr, e) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* The host[:port] of a base URL, without any user info (new reference). */
static json_t *url_host(const char *url)
{
    const char *h = strstr(url, "://");
    h = h != NULL ? h + 3 : url;
    size_t n = strcspn(h, "/?#");
    const char *at = memchr(h, '@', n);
    if (at != NULL) {
        n -= (size_t)(at + 1 - h);
        h = at + 1;
    }
    return json_stringn(h, n);
}

static json_t *rate_json(double v)
{
    return v > 0 ? json_real(v) : json_null();
}

static int cmp_providers(const void *a, const void *b)
{
    const struct evd_provider *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

json_t *evd_providers_list(const struct evd_providers *p)
{
    json_t *arr = json_array();
    const struct evd_provider *sorted[MAX_PROVIDERS];
    if (arr == NULL)
        return NULL;
    for (size_t i = 0; i < p->nproviders; i++)
        sorted[i] = &p->providers[i];
    qsort(sorted, p->nproviders, sizeof(sorted[0]), cmp_providers);
    for (size_t i = 0; i < p->nproviders; i++) {
        const struct evd_provider *pr = sorted[i];
        json_t *limits = json_array();
        for (size_t k = 0; limits != NULL && k < pr->nrates; k++)
            if (json_array_append_new(limits, json_pack("{s:s,s:o,s:o}", "model",
                                                         pr->rates[k].model, "rpm",
                                                         rate_json(pr->rates[k].rpm), "tpm",
                                                         rate_json(pr->rates[k].tpm))) != 0) {
                json_decref(limits);
                limits = NULL;
            }
        json_t *e = limits == NULL ? NULL
                                   : json_pack("{s:s,s:s,s:o,s:b,s:o,s:o,s:o}", "name", pr->name,
                                               "kind", kind_names[pr->kind], "host",
                                               url_host(pr->base_url), "available",
                                               evd_provider_available(pr), "rpm",
                                               rate_json(pr->rpm), "tpm", rate_json(pr->tpm),
                                               "model_limits", limits);
        if (e == NULL || json_array_append_new(arr, e) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}
