/*
 * The provider registry: which model providers exist (built-ins from OPENAI_* and
 * ANTHROPIC_* plus EVALD_PROVIDERS_FILE), their wire kind, base URL, API key and the price
 * table (embedded harness/prices.json, EVALD_PRICES_FILE, then per-provider model prices).
 * Loaded once at start-up; afterwards it is immutable and safe to read from any thread.
 * API keys live only in this object's memory: no function here returns or prints one.
 */
#ifndef EVD_HARNESS_PROVIDERS_H
#define EVD_HARNESS_PROVIDERS_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"

enum evd_provider_kind {
    EVD_KIND_OPENAI_RESPONSES,   /* "openai-responses": POST {base}/responses */
    EVD_KIND_ANTHROPIC_MESSAGES, /* "anthropic-messages": POST {base}/v1/messages */
    EVD_KIND_OPENAI_CHAT,        /* "openai-chat": POST {base}/chat/completions */
};

struct evd_price {
    double input_usd_per_mtok;
    double cached_input_usd_per_mtok; /* cache reads */
    double cache_write_usd_per_mtok;  /* cache writes; defaults to the input price */
    double output_usd_per_mtok;
};

struct evd_provider; /* opaque: name, kind, base URL, key, models */
struct evd_providers;

/*
 * Looks up an environment variable; returns a borrowed string or NULL. The default reads
 * getenv(3); tests pass their own.
 */
typedef const char *(*evd_env_fn)(void *ctx, const char *name);

/*
 * Builds the registry from the environment: OPENAI_API_KEY, OPENAI_BASE_URL,
 * ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, EVALD_PRICES_FILE, EVALD_PROVIDERS_FILE.
 * env NULL means getenv(3). Returns EVD_OK and *out, or EVD_EINVAL with a message naming the
 * file and field that is wrong. Free with evd_providers_free.
 */
enum evd_code evd_providers_load(evd_env_fn env, void *env_ctx, struct evd_providers **out,
                                 struct evd_err *err);
void evd_providers_free(struct evd_providers *p);

/*
 * A resolved model: the provider that serves it and the model id to send (a "provider/"
 * prefix removed). Borrowed pointers, valid while the registry lives.
 */
struct evd_resolved_model {
    const struct evd_provider *provider;
    const char *model; /* points into the caller's model JSON or the registry */
    char model_buf[256];
};

/*
 * Chooses the provider for a normalized `model` object (borrowed): model.provider when
 * given (it must name a configured provider), else a "provider/" prefix of model.model,
 * else the model name (gpt-*, o<digit>*, codex* → openai; claude-* → anthropic).
 * EVD_EINVAL names `model.provider` or `model.model` when nothing fits, and says when the
 * provider has no API key configured.
 */
enum evd_code evd_providers_resolve(const struct evd_providers *p, json_t *model,
                                    struct evd_resolved_model *out, struct evd_err *err);

/* Price of `model` on `provider`; false when unpriced. Exact id, then id minus a date suffix. */
bool evd_providers_price(const struct evd_providers *p, const struct evd_provider *provider,
                         const char *model, struct evd_price *out);

/*
 * The model catalogue for GET /v1/models: new reference to
 * [{provider, kind, model, available, pricing:{input_usd_per_mtok, cached_input_usd_per_mtok,
 *   cache_write_usd_per_mtok, output_usd_per_mtok}}], ordered by provider then model.
 * `available` is false when the provider needs an API key that is not set.
 */
json_t *evd_providers_list_models(const struct evd_providers *p);

/*
 * The configured providers for GET /v1/providers, without secrets: new reference to
 * [{name, kind, host (host[:port] of the base URL, no user info), available, rpm, tpm
 *   (configured for every model; null when none), model_limits:[{model, rpm, tpm}]}],
 * ordered by name. NULL without memory.
 */
json_t *evd_providers_list(const struct evd_providers *p);

/* Accessors (borrowed strings, valid while the registry lives). */
const char *evd_provider_name(const struct evd_provider *pr);
enum evd_provider_kind evd_provider_kind(const struct evd_provider *pr);
const char *evd_provider_base_url(const struct evd_provider *pr);
/* True when the provider has a key, or was configured without api_key_env (a server that
 * takes none: no Authorization or x-api-key header is sent). */
bool evd_provider_available(const struct evd_provider *pr);
/* The key for the Authorization/x-api-key header; NULL when none. Never log it. */
const char *evd_provider_api_key(const struct evd_provider *pr);
/* The environment variable the key came from (for messages), or NULL. */
const char *evd_provider_key_env(const struct evd_provider *pr);
/* True for the built-in providers, whose servers enforce the structured-output format;
 * false for providers-file entries (local servers make no such promise), whose answers
 * may also come without the `result` envelope (evd_so_decode_unenforced). */
bool evd_provider_enforces_format(const struct evd_provider *pr);

/* The configured rate limits of `model` on the provider (requests and tokens per minute; 0 =
 * none configured): the model's own `rpm`/`tpm` in the providers file, else the provider's. */
void evd_provider_rate(const struct evd_provider *pr, const char *model, double *rpm,
                       double *tpm);

/* "openai-responses", "anthropic-messages", "openai-chat"; parse returns -1 when unknown. */
const char *evd_provider_kind_name(enum evd_provider_kind k);
int evd_provider_kind_parse(const char *s);

/* The price table compiled into the binary: the text of harness/prices.json. */
extern const char EVD_PRICES_JSON[];

#endif
