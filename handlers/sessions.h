/*
 * REST resources of ad-hoc sessions and of the session comparison, their Server-Sent
 * Events streams, and the registration of eval::compare-sessions in the function mirror.
 * Handlers run on connection threads and only call the engine's thread-safe functions.
 */
#ifndef EVD_HANDLERS_SESSIONS_H
#define EVD_HANDLERS_SESSIONS_H

#include "handlers/api.h"

/* Registers eval::compare-sessions with handlers/functions.c (before threads). */
void evd_sessions_register(void);

void evd_h_session_create(struct evd_req *req, struct evd_resp *resp);
void evd_h_session_list(struct evd_req *req, struct evd_resp *resp);
void evd_h_session_get(struct evd_req *req, struct evd_resp *resp);
void evd_h_session_delete(struct evd_req *req, struct evd_resp *resp);
void evd_h_session_message(struct evd_req *req, struct evd_resp *resp);
void evd_h_session_cancel(struct evd_req *req, struct evd_resp *resp);
void evd_h_session_events(struct evd_req *req, struct evd_resp *resp);
void evd_h_sessions_compare(struct evd_req *req, struct evd_resp *resp);
void evd_h_sessions_compare_events(struct evd_req *req, struct evd_resp *resp);

#endif
