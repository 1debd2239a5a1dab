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
 *
 * Experiments (spec "Plan and execution") order the cells of one case: arms 0 (control)
 * .. k−1, repeats r = 1, 2, …; the k cells of repeat r run one after another in the order
 * of row (r − 1) mod R of the design below, and the cell's position is its 1-based place
 * over all the case's cells, (r − 1)·k + (its place in the row).
 *   k = 2: the seed's pairs, 0,1 for odd r and 1,0 for even r.
 *   k >= 3: a Williams design. With s = 0, 1, k−1, 2, k−2, 3, … (s(0) = 0, s(2h−1) = h,
 *   s(2h) = k − h), row j = 0..k−1 is w_j(i) = (s(i) + j) mod k for i = 0..k−1; for odd k
 *   the k mirrored rows (each reversed) follow, so R = k for even k and 2k for odd k.
 *   Over the R rows every arm takes every place equally often and every ordered pair of
 *   distinct arms is adjacent equally often (first-order carryover balance).
 *   (For k = 2 the same construction gives the seed's pairs.)
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

/* Arms of an experiment: 2 (control and one treatment) to EVD_PLAN_MAX_ARMS. */
#define EVD_PLAN_MAX_ARMS 5

/* R, the number of distinct rows of the design for k arms (2 <= k <= EVD_PLAN_MAX_ARMS). */
unsigned evd_plan_design_rows(unsigned k);

/* order[0..k) = the arms of repeat `repeat` (>= 1) in run order. */
void evd_plan_arm_order(unsigned k, uint32_t repeat, unsigned *order);

/* The 1-based position within its case of the cell (repeat >= 1, arm < k). */
uint32_t evd_plan_cell_position(unsigned k, uint32_t repeat, unsigned arm);

/* The cell at 1-based position `position` within a case: its repeat and arm. */
void evd_plan_cell_at(unsigned k, uint32_t position, uint32_t *repeat, unsigned *arm);

/*
 * Writes an experiment run's session id "<experiment_id>_<case_index>_<arm>_<repeat>"
 * into buf; returns snprintf's result.
 */
int evd_plan_experiment_session_id(const char *experiment_id, uint32_t case_index, unsigned arm,
                                   uint32_t repeat, char *buf, size_t size);

#endif
