/* Webhook subscriptions of eval::completed and their deliveries: /v1/subscriptions. */
#ifndef EVD_HANDLERS_SUBSCRIPTIONS_H
#define EVD_HANDLERS_SUBSCRIPTIONS_H

#include "handlers/api.h"

void evd_h_subs_list(struct evd_req *req, struct evd_resp *resp);
void evd_h_sub_create(struct evd_req *req, struct evd_resp *resp);
void evd_h_sub_get(struct evd_req *req, struct evd_resp *resp);
void evd_h_sub_delete(struct evd_req *req, struct evd_resp *resp);
void evd_h_sub_deliveries(struct evd_req *req, struct evd_resp *resp);

#endif
