/*
 * Operational endpoints: liveness, readiness, Prometheus metrics, the OpenAPI
 * document and the console's embedded assets. All are public (no token).
 */
#ifndef EVD_HANDLERS_SYSTEM_H
#define EVD_HANDLERS_SYSTEM_H

#include "handlers/api.h"

void evd_h_healthz(struct evd_req *req, struct evd_resp *resp);
void evd_h_readyz(struct evd_req *req, struct evd_resp *resp);
void evd_h_metrics(struct evd_req *req, struct evd_resp *resp);
void evd_h_openapi(struct evd_req *req, struct evd_resp *resp);
void evd_h_console_index(struct evd_req *req, struct evd_resp *resp);
void evd_h_console_asset(struct evd_req *req, struct evd_resp *resp);

/* eval::ui-content semantics shared with the function mirror: the asset at `path`
 * as {content, content_type}; new reference, or NULL when unknown. */
json_t *evd_ui_content(const char *path);

#endif
