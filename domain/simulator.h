/*
 * The simulated user of an experiment (../shared/spec/agent-cases.md, "Simulated users";
 * docs/agents.md): the request member, the per-case instructions, the simulator's view of
 * the conversation and the end of a conversation. Pure; values passed in are borrowed.
 *
 * The request member `simulator` is {"model": {…} (the seed's model object, as judge.model),
 * "instructions": "<template>", "max_turns": 1–20 (default 5), "stop": "<token>"
 * (default "[[DONE]]")}, closed. Normalized: {model, instructions, max_turns, stop}.
 */
#ifndef EVD_DOMAIN_SIMULATOR_H
#define EVD_DOMAIN_SIMULATOR_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"

#define EVD_SIMULATOR_MAX_TURNS 20
#define EVD_SIMULATOR_DEFAULT_MAX_TURNS 5
#define EVD_SIMULATOR_DEFAULT_STOP "[[DONE]]"

/*
 * Checks and normalizes `simulator` (absent or null: *out is JSON null). Messages name the
 * field: "simulator must be an object", "simulator.colour is not a known field",
 * "simulator.model is required", "simulator.model.<…>" (the seed's model rules),
 * "simulator.instructions is required" / "… must be a string" / "… cannot be empty",
 * "simulator.max_turns must be an integer between 1 and 20", "simulator.stop must be a
 * non-empty string".
 */
enum evd_code evd_simulator_request(const json_t *simulator, json_t **out, struct evd_err *err);

/*
 * The instructions rendered for case c (the persona and the goal): *out a malloc'd
 * string. EVD_EINVAL "case <id>: template variable <name> is not defined".
 */
enum evd_code evd_simulator_instructions(const json_t *simulator, const json_t *c, char **out,
                                         struct evd_err *err);

/*
 * What the simulator model is sent: the conversation so far (`transcript`, in the shape of
 * agent-cases.md: [{role, content, function_calls?}]) with the roles swapped and the
 * function calls left out, so that the agent's last answer is the simulator's user
 * message. New reference; NULL without memory.
 */
json_t *evd_simulator_view(const json_t *transcript);

/* True when the simulator's reply (len bytes) contains the stop token: the conversation
 * ends and that reply is neither sent nor kept. */
bool evd_simulator_stops(const json_t *simulator, const char *reply, size_t len);

#endif
