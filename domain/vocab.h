/*
 * The domain's vocabulary: the enumerations of the seed contract (roles, execution
 * orders, run and evaluation statuses, failure phases, comparison dimensions) with
 * their exact wire names. Pure functions over constants; thread-safe; every returned
 * string is static.
 */
#ifndef EVD_DOMAIN_VOCAB_H
#define EVD_DOMAIN_VOCAB_H

#include <stdbool.h>

/* VariantRoleV1. */
enum evd_role {
    EVD_ROLE_CONTROL = 0,
    EVD_ROLE_TREATMENT,
};

/* ExecutionOrderV1. */
enum evd_order {
    EVD_ORDER_CONTROL_FIRST = 0, /* "balanced_control_first" (the default) */
    EVD_ORDER_TREATMENT_FIRST,   /* "balanced_treatment_first" */
};

/* EvalRunStatusV1. */
enum evd_run_status {
    EVD_RUN_PENDING = 0,
    EVD_RUN_RUNNING,
    EVD_RUN_COMPLETED,
    EVD_RUN_FAILED,
    EVD_RUN_CANCELLED,
};

/* EvalStatusV1. */
enum evd_eval_status {
    EVD_EVAL_QUEUED = 0,
    EVD_EVAL_RUNNING,
    EVD_EVAL_COMPLETED,
    EVD_EVAL_FAILED,
    EVD_EVAL_CANCELLED,
};

/* EvalPhaseV1: where a run failure happened. */
enum evd_phase {
    EVD_PHASE_SETUP = 0,
    EVD_PHASE_SEND,
    EVD_PHASE_AWAIT,
    EVD_PHASE_COLLECT,
    EVD_PHASE_EVALUATE,
    EVD_PHASE_LIMIT,
    EVD_PHASE_CANCEL,
};

/* ComparisonDimensionV1. */
enum evd_dimension {
    EVD_DIMENSION_PROMPT = 0,
    EVD_DIMENSION_SYSTEM_PROMPT,
};

/* "control" / "treatment". */
const char *evd_role_name(enum evd_role role);
/* Parses a wire name; false (and *out untouched) when s is NULL or unknown. */
bool evd_role_parse(const char *s, enum evd_role *out);

const char *evd_order_name(enum evd_order order);
bool evd_order_parse(const char *s, enum evd_order *out);
/* The other balanced order: what `eval::rerun {reverse_order:true}` runs. */
enum evd_order evd_order_reverse(enum evd_order order);

const char *evd_run_status_name(enum evd_run_status status);
bool evd_run_status_parse(const char *s, enum evd_run_status *out);
/* completed, failed and cancelled are terminal for a run. */
bool evd_run_status_is_terminal(enum evd_run_status status);

const char *evd_eval_status_name(enum evd_eval_status status);
bool evd_eval_status_parse(const char *s, enum evd_eval_status *out);
/* completed, failed and cancelled are terminal for an evaluation. */
bool evd_eval_status_is_terminal(enum evd_eval_status status);

const char *evd_phase_name(enum evd_phase phase);
bool evd_phase_parse(const char *s, enum evd_phase *out);

const char *evd_dimension_name(enum evd_dimension dimension);
bool evd_dimension_parse(const char *s, enum evd_dimension *out);

#endif
