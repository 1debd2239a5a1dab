/*
 * Wire names of the domain enumerations (see vocab.h). Static tables only;
 * thread-safe.
 */
#include "domain/vocab.h"

#include <stddef.h>
#include <string.h>

static const char *const ROLE_NAMES[] = {"control", "treatment"};
static const char *const ORDER_NAMES[] = {"balanced_control_first", "balanced_treatment_first"};
static const char *const RUN_STATUS_NAMES[] = {"pending", "running", "completed", "failed",
                                               "cancelled"};
static const char *const EVAL_STATUS_NAMES[] = {"queued", "running", "completed", "failed",
                                                "cancelled"};
static const char *const PHASE_NAMES[] = {"setup",    "send",  "await", "collect",
                                          "evaluate", "limit", "cancel"};
static const char *const DIMENSION_NAMES[] = {"prompt", "system_prompt"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *name_at(const char *const *names, size_t n, int v)
{
    return (v >= 0 && (size_t)v < n) ? names[v] : "unknown";
}

static int index_of(const char *const *names, size_t n, const char *s)
{
    if (s == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], s) == 0)
            return (int)i;
    }
    return -1;
}

const char *evd_role_name(enum evd_role role)
{
    return name_at(ROLE_NAMES, COUNT(ROLE_NAMES), (int)role);
}

bool evd_role_parse(const char *s, enum evd_role *out)
{
    int i = index_of(ROLE_NAMES, COUNT(ROLE_NAMES), s);
    if (i < 0)
        return false;
    *out = (enum evd_role)i;
    return true;
}

const char *evd_order_name(enum evd_order order)
{
    return name_at(ORDER_NAMES, COUNT(ORDER_NAMES), (int)order);
}

bool evd_order_parse(const char *s, enum evd_order *out)
{
    int i = index_of(ORDER_NAMES, COUNT(ORDER_NAMES), s);
    if (i < 0)
        return false;
    *out = (enum evd_order)i;
    return true;
}

enum evd_order evd_order_reverse(enum evd_order order)
{
    return order == EVD_ORDER_CONTROL_FIRST ? EVD_ORDER_TREATMENT_FIRST : EVD_ORDER_CONTROL_FIRST;
}

const char *evd_run_status_name(enum evd_run_status status)
{
    return name_at(RUN_STATUS_NAMES, COUNT(RUN_STATUS_NAMES), (int)status);
}

bool evd_run_status_parse(const char *s, enum evd_run_status *out)
{
    int i = index_of(RUN_STATUS_NAMES, COUNT(RUN_STATUS_NAMES), s);
    if (i < 0)
        return false;
    *out = (enum evd_run_status)i;
    return true;
}

bool evd_run_status_is_terminal(enum evd_run_status status)
{
    return status == EVD_RUN_COMPLETED || status == EVD_RUN_FAILED || status == EVD_RUN_CANCELLED;
}

const char *evd_eval_status_name(enum evd_eval_status status)
{
    return name_at(EVAL_STATUS_NAMES, COUNT(EVAL_STATUS_NAMES), (int)status);
}

bool evd_eval_status_parse(const char *s, enum evd_eval_status *out)
{
    int i = index_of(EVAL_STATUS_NAMES, COUNT(EVAL_STATUS_NAMES), s);
    if (i < 0)
        return false;
    *out = (enum evd_eval_status)i;
    return true;
}

bool evd_eval_status_is_terminal(enum evd_eval_status status)
{
    return status == EVD_EVAL_COMPLETED || status == EVD_EVAL_FAILED ||
           status == EVD_EVAL_CANCELLED;
}

const char *evd_phase_name(enum evd_phase phase)
{
    return name_at(PHASE_NAMES, COUNT(PHASE_NAMES), (int)phase);
}

bool evd_phase_parse(const char *s, enum evd_phase *out)
{
    int i = index_of(PHASE_NAMES, COUNT(PHASE_NAMES), s);
    if (i < 0)
        return false;
    *out = (enum evd_phase)i;
    return true;
}

const char *evd_dimension_name(enum evd_dimension dimension)
{
    return name_at(DIMENSION_NAMES, COUNT(DIMENSION_NAMES), (int)dimension);
}

bool evd_dimension_parse(const char *s, enum evd_dimension *out)
{
    int i = index_of(DIMENSION_NAMES, COUNT(DIMENSION_NAMES), s);
    if (i < 0)
        return false;
    *out = (enum evd_dimension)i;
    return true;
}
