/*
 * Balanced run plans (see plan.h). Pure arithmetic plus JSON construction; thread-safe.
 */
#include "domain/plan.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>

#include "domain/fields.h"
#include "domain/run.h"

struct evd_plan_entry evd_plan_entry_at(enum evd_order order, size_t index)
{
    struct evd_plan_entry e;
    e.iteration = (uint32_t)(index / 2 + 1);
    e.pair_position = (unsigned)(index % 2 + 1);
    e.execution_position = (uint32_t)(index + 1);
    bool odd = (e.iteration % 2) == 1;
    bool control_first = order == EVD_ORDER_CONTROL_FIRST ? odd : !odd;
    bool control = control_first ? e.pair_position == 1 : e.pair_position == 2;
    e.role = control ? EVD_ROLE_CONTROL : EVD_ROLE_TREATMENT;
    return e;
}

int evd_plan_run_id(enum evd_role role, uint32_t iteration, char *buf, size_t size)
{
    return snprintf(buf, size, "%s-%" PRIu32, evd_role_name(role), iteration);
}

int evd_plan_session_id(const char *evaluation_id, enum evd_role role, uint32_t iteration,
                        char *buf, size_t size)
{
    return snprintf(buf, size, "%s_%c_%" PRIu32, evaluation_id,
                    role == EVD_ROLE_CONTROL ? 'c' : 't', iteration);
}

json_t *evd_plan_build(const char *evaluation_id, uint32_t runs, enum evd_order order)
{
    json_t *plan = json_array();
    int rc = 0;
    for (size_t i = 0; plan != NULL && i < (size_t)runs * 2; i++) {
        struct evd_plan_entry e = evd_plan_entry_at(order, i);
        rc |= json_array_append_new(plan, evd_run_new(evaluation_id, &e));
        if (rc != 0)
            break;
    }
    if (rc != 0) {
        json_decref(plan);
        return NULL;
    }
    return plan;
}

json_t *evd_plan_effective_order(const json_t *runs)
{
    json_t *out = json_array();
    int rc = 0;
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run)
    {
        char item[96];
        const char *role = evd_fields_str(run, "role");
        snprintf(item, sizeof(item), "%" JSON_INTEGER_FORMAT ":%s:%" JSON_INTEGER_FORMAT,
                 evd_fields_int(run, "execution_position", (json_int_t)i + 1),
                 role != NULL ? role : "unknown", evd_fields_int(run, "iteration", 0));
        rc |= json_array_append_new(out, json_string(item));
    }
    if (rc != 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* ---- experiments: the order of the cells within a case ---- */

unsigned evd_plan_design_rows(unsigned k)
{
    assert(k >= 2 && k <= EVD_PLAN_MAX_ARMS);
    return k % 2 == 0 ? k : 2 * k;
}

/* s(i) = 0, 1, k−1, 2, k−2, …: s(2h−1) = h, s(2h) = k − h. */
static unsigned williams_s(unsigned k, unsigned i)
{
    if (i == 0)
        return 0;
    return i % 2 == 1 ? (i + 1) / 2 : k - i / 2;
}

void evd_plan_arm_order(unsigned k, uint32_t repeat, unsigned *order)
{
    assert(k >= 2 && k <= EVD_PLAN_MAX_ARMS && repeat >= 1);
    if (k == 2) { /* the seed's pairs: control first in odd repeats */
        bool odd = repeat % 2 == 1;
        order[0] = odd ? 0 : 1;
        order[1] = odd ? 1 : 0;
        return;
    }
    unsigned row = (unsigned)((repeat - 1) % evd_plan_design_rows(k));
    unsigned j = row % k;
    bool mirrored = row >= k; /* odd k: rows k..2k−1 are rows 0..k−1 reversed */
    for (unsigned i = 0; i < k; i++) {
        unsigned arm = (williams_s(k, i) + j) % k;
        order[mirrored ? k - 1 - i : i] = arm;
    }
}

uint32_t evd_plan_cell_position(unsigned k, uint32_t repeat, unsigned arm)
{
    unsigned order[EVD_PLAN_MAX_ARMS];
    evd_plan_arm_order(k, repeat, order);
    unsigned place = 0;
    while (place < k && order[place] != arm)
        place++;
    assert(place < k);
    return (repeat - 1) * k + place + 1;
}

void evd_plan_cell_at(unsigned k, uint32_t position, uint32_t *repeat, unsigned *arm)
{
    assert(position >= 1);
    unsigned order[EVD_PLAN_MAX_ARMS];
    *repeat = (position - 1) / k + 1;
    evd_plan_arm_order(k, *repeat, order);
    *arm = order[(position - 1) % k];
}

int evd_plan_experiment_session_id(const char *experiment_id, uint32_t case_index, unsigned arm,
                                   uint32_t repeat, char *buf, size_t size)
{
    return snprintf(buf, size, "%s_%" PRIu32 "_%u_%" PRIu32, experiment_id, case_index, arm,
                    repeat);
}
