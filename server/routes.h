/* The routing table of evald: every REST route and the handler that serves it. */
#ifndef EVD_SERVER_ROUTES_H
#define EVD_SERVER_ROUTES_H

#include "server/router.h"

extern const struct evd_route evd_routes[];
extern const size_t evd_nroutes;

#endif
