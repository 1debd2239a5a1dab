/* HTTP tools (functions the agent and HTTP evaluators call): /v1/tools. */
#ifndef EVD_HANDLERS_TOOLS_H
#define EVD_HANDLERS_TOOLS_H

#include "handlers/api.h"

void evd_h_tools_list(struct evd_req *req, struct evd_resp *resp);
void evd_h_tool_put(struct evd_req *req, struct evd_resp *resp);
void evd_h_tool_get(struct evd_req *req, struct evd_resp *resp);
void evd_h_tool_delete(struct evd_req *req, struct evd_resp *resp);

#endif
