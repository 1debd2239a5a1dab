/*
 * Comparison artifacts: the hashes a report carries so two evaluations can be shown
 * to compare the same things. Prompts are hashed as their raw UTF-8 bytes; JSON values
 * (evaluator arguments, model config, function policy, limits, output contract) in
 * canonical form (canonical.h), all as lowercase hex SHA-256. A null system prompt has
 * no hash; "" hashes like any string.
 * Pure; thread-safe; arguments are borrowed; results are new references, NULL on ENOMEM.
 */
#ifndef EVD_DOMAIN_ARTIFACTS_H
#define EVD_DOMAIN_ARTIFACTS_H

#include <jansson.h>

/* VariantArtifactV1 {label?, prompt_sha256, system_prompt_sha256?} of an EvalVariantV1. */
json_t *evd_artifacts_variant(const json_t *variant);

/*
 * SharedArtifactsV1 {model_sha256, function_policy_sha256, limits_sha256, output_sha256}
 * of a normalized request.
 */
json_t *evd_artifacts_shared(const json_t *request);

/* EvaluatorArtifactV1 {function_id, arguments_sha256} of an EvaluatorSpecV1 (arguments
 * default to {}). */
json_t *evd_artifacts_evaluator(const json_t *evaluator);

#endif
