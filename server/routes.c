/* The routing table (immutable). Later layers add their rows here. */
#include "server/routes.h"

#include "handlers/functions.h"
#include "handlers/system.h"

const struct evd_route evd_routes[] = {
    {"GET", "/healthz", evd_h_healthz, EVD_ROUTE_PUBLIC},
    {"GET", "/readyz", evd_h_readyz, EVD_ROUTE_PUBLIC},
    {"GET", "/metrics", evd_h_metrics, EVD_ROUTE_PUBLIC},
    {"GET", "/openapi.json", evd_h_openapi, EVD_ROUTE_PUBLIC},
    {"GET", "/", evd_h_console_index, EVD_ROUTE_PUBLIC},
    {"GET", "/console/{path*}", evd_h_console_asset, EVD_ROUTE_PUBLIC},
    {"GET", "/v1/functions", evd_h_functions_list, 0},
    {"POST", "/v1/functions/{function_id}", evd_h_function_call, 0},
};

const size_t evd_nroutes = sizeof(evd_routes) / sizeof(evd_routes[0]);
