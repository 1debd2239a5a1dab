/* SQL of the completion events outbox for experiments; see events.h. */
#include "store/events.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "store/db.h"
#include "store/evals.h"

static bool terminal(const char *status)
{
    return status != NULL && (strcmp(status, "completed") == 0 ||
                              strcmp(status, "cancelled") == 0 || strcmp(status, "failed") == 0);
}

/* The insert skips an experiment that already has its event; the notification is sent
 * only for a row this call wrote. */
static const char SQL_EXPERIMENT_EVENT[] =
    "WITH ins AS ("
    "  INSERT INTO completion_events (event_id, event_type, experiment_id, payload, created_at)"
    "  VALUES ($1, '" EVD_EVENT_EXPERIMENT "', $2, $3::jsonb, $4::bigint)"
    "  ON CONFLICT (experiment_id) DO NOTHING RETURNING event_id)"
    " SELECT pg_notify('" EVD_CHANNEL_COMPLETED "', event_id) FROM ins";

enum evd_code evd_store_experiment_event(PGconn *c, const char *experiment_id,
                                         const json_t *payload, int64_t now, struct evd_err *err)
{
    const char *id = json_string_value(json_object_get(payload, "experiment_id"));
    if (experiment_id == NULL || experiment_id[0] == '\0')
        return evd_err_set(err, EVD_EINVAL, "experiment event: experiment_id is required");
    if (!json_is_object(payload) || id == NULL || strcmp(id, experiment_id) != 0)
        return evd_err_set(err, EVD_EINVAL, "experiment event: payload.experiment_id must be %.64s",
                           experiment_id);
    if (!terminal(json_string_value(json_object_get(payload, "status"))))
        return evd_err_set(err, EVD_EINVAL,
                           "experiment event: payload.status must be completed, cancelled or "
                           "failed");
    if (!json_is_integer(json_object_get(payload, "timestamp")))
        return evd_err_set(err, EVD_EINVAL,
                           "experiment event: payload.timestamp must be an integer");
    if (!json_is_array(json_object_get(payload, "verdicts")))
        return evd_err_set(err, EVD_EINVAL, "experiment event: payload.verdicts must be an array");
    char *text = evd_json_compact(payload, NULL);
    if (text == NULL)
        return evd_err_set(err, EVD_ENOMEM, "out of memory");
    char event_id[48], ts[32];
    evd_new_id("evt_", event_id, sizeof(event_id));
    snprintf(ts, sizeof(ts), "%lld", (long long)now);
    const char *p[] = {event_id, experiment_id, text, ts};
    enum evd_code rc = evd_db_exec(c, SQL_EXPERIMENT_EVENT, 4, p, err);
    free(text);
    return rc;
}
