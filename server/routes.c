/* The routing table (immutable). Later layers add their rows here. A route runs on the
 * handler pool unless it is EVD_ROUTE_INLINE: mark one so only when it reads no database
 * and takes no lock held across a query (server/router.h). */
#include "server/routes.h"

#include "handlers/datasets.h"
#include "handlers/evaluations.h"
#include "handlers/experiments.h"
#include "handlers/judges.h"
#include "handlers/functions.h"
#include "handlers/providers.h"
#include "handlers/reviews.h"
#include "handlers/sessions.h"
#include "handlers/subscriptions.h"
#include "handlers/tools.h"
#include "handlers/system.h"

const struct evd_route evd_routes[] = {
    {"GET", "/healthz", evd_h_healthz, EVD_ROUTE_PUBLIC | EVD_ROUTE_INLINE},
    {"GET", "/readyz", evd_h_readyz, EVD_ROUTE_PUBLIC | EVD_ROUTE_URGENT},
    {"GET", "/metrics", evd_h_metrics, EVD_ROUTE_PUBLIC | EVD_ROUTE_INLINE},
    {"GET", "/openapi.json", evd_h_openapi, EVD_ROUTE_PUBLIC | EVD_ROUTE_INLINE},
    {"GET", "/", evd_h_console_index, EVD_ROUTE_PUBLIC | EVD_ROUTE_INLINE},
    {"GET", "/console/{path*}", evd_h_console_asset, EVD_ROUTE_PUBLIC | EVD_ROUTE_INLINE},
    {"GET", "/v1/functions", evd_h_functions_list, EVD_ROUTE_INLINE},
    {"POST", "/v1/functions/{function_id}", evd_h_function_call, 0},
    {"POST", "/v1/evaluations", evd_h_eval_create, EVD_ROUTE_IDEMPOTENT},
    {"GET", "/v1/evaluations", evd_h_eval_list, 0},
    {"GET", "/v1/evaluations/{id}", evd_h_eval_get, 0},
    {"DELETE", "/v1/evaluations/{id}", evd_h_eval_delete, 0},
    {"GET", "/v1/evaluations/{id}/status", evd_h_eval_status, 0},
    {"GET", "/v1/evaluations/{id}/events", evd_h_eval_events, EVD_ROUTE_QUERY_TOKEN},
    {"POST", "/v1/evaluations/{id}/cancel", evd_h_eval_cancel, 0},
    {"POST", "/v1/evaluations/{id}/rerun", evd_h_eval_rerun, EVD_ROUTE_IDEMPOTENT},
    {"POST", "/v1/evaluations/{id}/rescore", evd_h_eval_rescore, EVD_ROUTE_IDEMPOTENT},
    {"POST", "/v1/sessions", evd_h_session_create, EVD_ROUTE_IDEMPOTENT},
    {"GET", "/v1/sessions", evd_h_session_list, 0},
    /* compare before {id}: the first matching row wins */
    {"GET", "/v1/sessions/compare", evd_h_sessions_compare, 0},
    {"GET", "/v1/sessions/compare/events", evd_h_sessions_compare_events, EVD_ROUTE_QUERY_TOKEN},
    {"GET", "/v1/sessions/{id}", evd_h_session_get, 0},
    {"DELETE", "/v1/sessions/{id}", evd_h_session_delete, 0},
    {"POST", "/v1/sessions/{id}/messages", evd_h_session_message, EVD_ROUTE_IDEMPOTENT},
    {"POST", "/v1/sessions/{id}/cancel", evd_h_session_cancel, 0},
    {"GET", "/v1/sessions/{id}/events", evd_h_session_events, EVD_ROUTE_QUERY_TOKEN},
    {"POST", "/v1/evaluators/exact", evd_h_evaluator_exact, 0},
    {"POST", "/v1/evaluators/normalized_text", evd_h_evaluator_normalized, 0},
    {"POST", "/v1/evaluators/trajectory", evd_h_evaluator_trajectory, 0},
    {"GET", "/v1/models", evd_h_models, EVD_ROUTE_INLINE},
    {"GET", "/v1/providers", evd_h_providers, EVD_ROUTE_INLINE},
    {"GET", "/v1/subscriptions", evd_h_subs_list, 0},
    {"POST", "/v1/subscriptions", evd_h_sub_create, EVD_ROUTE_IDEMPOTENT},
    {"GET", "/v1/subscriptions/{id}", evd_h_sub_get, 0},
    {"DELETE", "/v1/subscriptions/{id}", evd_h_sub_delete, 0},
    {"GET", "/v1/subscriptions/{id}/deliveries", evd_h_sub_deliveries, 0},
    {"POST", "/v1/datasets", evd_h_dataset_upload, EVD_ROUTE_UPLOAD | EVD_ROUTE_IDEMPOTENT},
    {"GET", "/v1/datasets", evd_h_datasets_list, 0},
    {"GET", "/v1/datasets/{id}", evd_h_dataset_get, 0},
    {"DELETE", "/v1/datasets/{id}", evd_h_dataset_delete, 0},
    {"GET", "/v1/datasets/{id}/cases", evd_h_dataset_cases, 0},
    {"POST", "/v1/experiments/plan", evd_h_experiment_plan, EVD_ROUTE_UPLOAD},
    {"POST", "/v1/experiments", evd_h_experiment_start, EVD_ROUTE_UPLOAD | EVD_ROUTE_IDEMPOTENT},
    {"GET", "/v1/experiments", evd_h_experiments_list, 0},
    {"GET", "/v1/experiments/{id}", evd_h_experiment_get, 0},
    {"DELETE", "/v1/experiments/{id}", evd_h_experiment_delete, 0},
    {"GET", "/v1/experiments/{id}/cases", evd_h_experiment_cases, 0},
    {"GET", "/v1/experiments/{id}/runs", evd_h_experiment_runs, 0},
    {"GET", "/v1/experiments/{id}/events", evd_h_experiment_events, EVD_ROUTE_QUERY_TOKEN},
    {"GET", "/v1/experiments/{id}/export", evd_h_experiment_export, 0},
    {"POST", "/v1/experiments/{id}/cancel", evd_h_experiment_cancel, 0},
    /* human review, re-score and retry (handlers/reviews.h) */
    {"PUT", "/v1/experiments/{id}/runs/{run_id}/review", evd_h_experiment_review_put, 0},
    {"GET", "/v1/experiments/{id}/reviews", evd_h_experiment_reviews, 0},
    {"GET", "/v1/experiments/{id}/review-queue", evd_h_experiment_review_queue, 0},
    {"GET", "/v1/experiments/{id}/agreement", evd_h_experiment_agreement, 0},
    {"GET", "/v1/experiments/{id}/judgements", evd_h_experiment_judgements, 0},
    {"GET", "/v1/experiments/{id}/pairs/reviews", evd_h_experiment_pair_reviews, 0},
    {"GET", "/v1/experiments/{id}/pairs/{case_id}/{repeat}/{treatment}", evd_h_experiment_pair,
     0},
    {"PUT", "/v1/experiments/{id}/pairs/{case_id}/{repeat}/{treatment}/review",
     evd_h_experiment_pair_review_put, 0},
    {"GET", "/v1/experiments/{id}/judge/agreement", evd_h_experiment_judge_agreement, 0},
    {"POST", "/v1/experiments/{id}/rescore", evd_h_experiment_rescore, EVD_ROUTE_IDEMPOTENT},
    {"POST", "/v1/experiments/{id}/retry", evd_h_experiment_retry, EVD_ROUTE_IDEMPOTENT},
    {"GET", "/v1/tools", evd_h_tools_list, 0},
    {"PUT", "/v1/tools/{id}", evd_h_tool_put, 0},
    {"GET", "/v1/tools/{id}", evd_h_tool_get, 0},
    {"DELETE", "/v1/tools/{id}", evd_h_tool_delete, 0},
};

const size_t evd_nroutes = sizeof(evd_routes) / sizeof(evd_routes[0]);
