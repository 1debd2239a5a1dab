/*
 * A conversation with a simulated user (../shared/spec/agent-cases.md, "Simulated users";
 * docs/agents.md), engine-internal: the agent's turns and the simulator's replies, each a
 * harness run on the calling thread (so each is a provider call of the experiment's run
 * attempt: the process's limiter, the attempt's cancel token, lease and deadline), folded
 * into one outcome as if the conversation were one agent run.
 */
#ifndef EVD_ENGINE_SIMULATE_H
#define EVD_ENGINE_SIMULATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/cancel.h"
#include "harness/harness.h"

/* The simulator's own model use in one run, reported apart from the agent's. */
struct evd_sim_use {
    int64_t calls;
    int64_t input_tokens;
    int64_t output_tokens;
    double cost_usd;
    bool priced;     /* every call had a price */
    int64_t answers; /* the agent's answers: the run's `turns` */
};

/*
 * Runs the conversation: the agent turn of `agent` (its prompt after its conversation,
 * both borrowed), then while the agent has answered fewer than simulator.max_turns user
 * turns, the simulator model (`simulator`, normalized, borrowed) with `instructions` as
 * its system prompt and the conversation with the roles swapped; its reply, unless it
 * holds the stop token, is the agent's next user message. Fills *out like
 * evd_harness_run (the caller zero-initialises it and clears it): the last answer as the
 * output, the agent's metrics summed over its turns, every span, the generations and
 * function calls of every turn, and the transcript's `conversation` in conversation order
 * (agent-cases.md). A turn that fails or is cancelled ends the conversation with its
 * status; a simulator call that fails fails the run ("simulated user: …"). *use gets the
 * simulator's figures. EVD_ENOMEM when not even an outcome could be built.
 */
/*
 * Where a conversation resumes from and where it keeps its checkpoints: after each
 * simulator reply that goes on (a turn done, the next user message known) `save` is given
 * the conversation so far (borrowed for the call); `checkpoint` (borrowed; NULL or JSON
 * null: none) is one such, from an earlier attempt, to go on from instead of starting
 * over, so that no turn it holds is sent again.
 */
struct evd_sim_resume {
    const json_t *checkpoint;
    int (*save)(void *ctx, const json_t *checkpoint);
    void *ctx;
};

enum evd_code evd_simulate(const struct evd_providers *providers,
                           const struct evd_harness_input *agent, const json_t *simulator,
                           const char *instructions, const struct evd_sim_resume *resume,
                           struct evd_cancel *cancel, struct evd_harness_outcome *out,
                           struct evd_sim_use *use, struct evd_err *err);

#endif
