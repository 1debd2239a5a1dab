/*
 * GET /v1/providers over the engine (evd_engine_providers): the configured providers
 * without their keys, and per model the rate limiter of this process. Answered from memory:
 * no provider is called and no database connection is taken.
 */
#include "handlers/providers.h"

#include "engine/engine.h"

void evd_h_providers(struct evd_req *req, struct evd_resp *resp)
{
    json_t *out = evd_engine_providers(req->ctx->engine);
    if (out == NULL) {
        evd_resp_problem(resp, EVD_ENOMEM, "out of memory");
        return;
    }
    evd_resp_json(resp, 200, out);
}
