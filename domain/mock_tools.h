/*
 * Mocked tools of an experiment (../shared/spec/agent-cases.md, "Mocked tools"): the
 * experiment's `tools` declarations and each case's `tool_results`. The harness answers
 * the calls (harness/mock.c); this file only checks the shapes.
 *
 * tools: [{"name", "description"?, "parameters"}], at most EVD_MOCK_TOOLS_MAX, names
 * unique. A name is 1-64 characters of letters, digits, '_', '.' or '-' starting with a
 * letter or digit: a registered tool id's characters without ':', within the 64 of a
 * provider's tool name. Messages name the field (indices 0-based):
 *   "tools must be an array", "tools must have at most 64 items",
 *   "tools[0] must be an object", "tools[0].<key> is not a known field",
 *   "tools[0].name is required", "tools[0].name must be a string",
 *   "tools[0].name must be 1-64 characters of letters, digits, '_', '.' or '-', starting
 *    with a letter or digit",
 *   "tools[2].name \"x\" is declared twice",
 *   "tools[0].description must be a string", "tools[0].description must be at most 4096
 *    bytes",
 *   "tools[0].parameters is required", "tools[0].parameters must be a JSON Schema object",
 *   "tools[0].parameters is not a valid JSON Schema: <the validator's message>".
 *
 * tool_results: {"<declared name>": <value>}. A value that is an array whose items are
 * all objects with a "when" member is a `when` list: each item is then exactly
 * {"when": object, "result": any}. Any other array is a sequence (the k-th call gets the
 * k-th item, the last repeats) and any other value answers every call; neither is
 * checked further. Messages start with the case id:
 *   "case q3: tool_results must be an object",
 *   "case q3: tool_results.foo names no declared tool",
 *   "case q3: tool_results.search[1].when must be an object",
 *   "case q3: tool_results.search[1].result is required",
 *   "case q3: tool_results.search[1].<key> is not a known field".
 *
 * Pure; thread-safe; every json_t is borrowed.
 */
#ifndef EVD_DOMAIN_MOCK_TOOLS_H
#define EVD_DOMAIN_MOCK_TOOLS_H

#include <jansson.h>
#include <stdbool.h>

#include "common/err.h"

#define EVD_MOCK_TOOLS_MAX 64
#define EVD_MOCK_TOOL_NAME_MAX 64
#define EVD_MOCK_TOOL_DESCRIPTION_MAX 4096

/* Checks an experiment's `tools` (NULL or JSON null: none declared). EVD_EINVAL. */
enum evd_code evd_mock_tools_check(json_t *tools, struct evd_err *err);

/*
 * Checks one case's `tool_results` (NULL or JSON null: none) against the declared
 * `tools` (already checked; NULL: none declared). EVD_EINVAL naming the case.
 */
enum evd_code evd_tool_results_check(json_t *tool_results, json_t *tools, const char *case_id,
                                     struct evd_err *err);

/*
 * Refuses a mocked name that is also a registered tool: `registered` is an array of tool
 * ids, as strings or as objects with an "id" (the stored tools), NULL for none.
 * EVD_EINVAL "tools[0]: weather.current is also a registered tool".
 */
enum evd_code evd_mock_tools_check_registered(json_t *tools, json_t *registered,
                                              struct evd_err *err);

/* True when `value` (a tool_results member) is a `when` list: a non-empty array whose
 * items are all objects with a "when" member. */
bool evd_tool_results_is_when_list(json_t *value);

#endif
