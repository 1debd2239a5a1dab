/* The model providers and this process's rate limiters: GET /v1/providers. */
#ifndef EVD_HANDLERS_PROVIDERS_H
#define EVD_HANDLERS_PROVIDERS_H

#include "handlers/api.h"

void evd_h_providers(struct evd_req *req, struct evd_resp *resp);

#endif
