/*
 * The run plan: which variant runs at each position of an evaluation, in a balanced
 * order that alternates which variant goes first in each pair.
 *
 * For iteration i = 1..runs two runs form pair i. With balanced_control_first the
 * control runs first when i is odd; with balanced_treatment_first when i is even. So
 * runs = 3 control-first gives C,T,T,C,C,T and treatment-first T,C,C,T,T,C.
 * execution_position is the 1-based position in the whole plan, pair_position is 1 or
 * 2 within the pair. Identity: run_id "<role>-<i>" (control-1), session_id
 * "<evaluation_id>_<c|t>_<i>" (eval_…_c_1), and the order string
 * "<execution_position>:<role>:<i>" (1:control:1).
 * Pure; thread-safe.
 */
#ifndef EVD_DOMAIN_PLAN_H
#define EVD_DOMAIN_PLAN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "domain/vocab.h"

/* One position of a plan. */
struct evd_plan_entry {
    enum evd_role role;
    uint32_t iteration;          /* 1..runs */
    uint32_t execution_position; /* 1..2*runs */
    unsigned pair_position;      /* 1 or 2 */
};

/* The entry at 0-based plan index `index` (< 2*runs) for the given order. */
struct evd_plan_entry evd_plan_entry_at(enum evd_order order, size_t index);

/* Writes run_id "<role>-<iteration>" into buf; returns snprintf's result. */
int evd_plan_run_id(enum evd_role role, uint32_t iteration, char *buf, size_t size);

/* Writes session_id "<evaluation_id>_<c|t>_<iteration>" into buf; returns snprintf's result. */
int evd_plan_session_id(const char *evaluation_id, enum evd_role role, uint32_t iteration,
                        char *buf, size_t size);

/*
 * The whole plan as an array of 2*runs EvalRunV1 objects in execution order, every run
 * pending with started_at 0 (see run.h). New reference, or NULL on ENOMEM.
 */
json_t *evd_plan_build(const char *evaluation_id, uint32_t runs, enum evd_order order);

/*
 * effective_execution_order of a runs array (borrowed, EvalRunV1 objects in plan
 * order): ["1:control:1", "2:treatment:1", ...]. New reference, or NULL on ENOMEM.
 */
json_t *evd_plan_effective_order(const json_t *runs);

#endif
