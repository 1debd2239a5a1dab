/* HTTP tools (functions the agent and HTTP evaluators call): /v1/tools. */
#ifndef EVD_HANDLERS_TOOLS_H
#define EVD_HANDLERS_TOOLS_H

#include "handlers/api.h"

struct evd_tool;

/*
 * Checks a PUT /v1/tools/{id} body (borrowed) for the tool `id`. On EVD_OK *t borrows its
 * strings and schema from id and body (nothing to free); else err names the field. Exposed
 * for the request-decoding fuzz target (tests/fuzz/).
 */
enum evd_code evd_h_tool_decode(const char *id, json_t *body, struct evd_tool *t,
                                struct evd_err *err);

void evd_h_tools_list(struct evd_req *req, struct evd_resp *resp);
void evd_h_tool_put(struct evd_req *req, struct evd_resp *resp);
void evd_h_tool_get(struct evd_req *req, struct evd_resp *resp);
void evd_h_tool_delete(struct evd_req *req, struct evd_resp *resp);

#endif
