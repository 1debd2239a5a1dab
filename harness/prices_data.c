/*
 * The price table compiled into the binary: a copy of harness/prices.json, kept identical by
 * the unit test prices_data_matches_json. Read-only data; safe from any thread.
 */
#include "harness/providers.h"

const char EVD_PRICES_JSON[] =
    "{\n"
    "  \"note\": \"USD per million tokens, from the providers' public price lists. cached_input = cache reads; cache_write defaults to the input price when absent. Override with EVALD_PRICES_FILE or per model in EVALD_PROVIDERS_FILE. Keep harness/prices_data.c identical (a unit test compares them).\",\n"
    "  \"prices\": [\n"
    "    {\"providers\": [\"openai\", \"openai-codex\"], \"model\": \"gpt-5\", \"input_usd_per_mtok\": 1.25, \"cached_input_usd_per_mtok\": 0.125, \"output_usd_per_mtok\": 10.0},\n"
    "    {\"providers\": [\"openai\", \"openai-codex\"], \"model\": \"gpt-5-mini\", \"input_usd_per_mtok\": 0.25, \"cached_input_usd_per_mtok\": 0.025, \"output_usd_per_mtok\": 2.0},\n"
    "    {\"providers\": [\"openai\", \"openai-codex\"], \"model\": \"gpt-5-nano\", \"input_usd_per_mtok\": 0.05, \"cached_input_usd_per_mtok\": 0.005, \"output_usd_per_mtok\": 0.4},\n"
    "    {\"providers\": [\"openai\", \"openai-codex\"], \"model\": \"gpt-5-codex\", \"input_usd_per_mtok\": 1.25, \"cached_input_usd_per_mtok\": 0.125, \"output_usd_per_mtok\": 10.0},\n"
    "    {\"providers\": [\"openai\"], \"model\": \"gpt-4.1\", \"input_usd_per_mtok\": 2.0, \"cached_input_usd_per_mtok\": 0.5, \"output_usd_per_mtok\": 8.0},\n"
    "    {\"providers\": [\"openai\"], \"model\": \"gpt-4.1-mini\", \"input_usd_per_mtok\": 0.4, \"cached_input_usd_per_mtok\": 0.1, \"output_usd_per_mtok\": 1.6},\n"
    "    {\"providers\": [\"openai\"], \"model\": \"gpt-4.1-nano\", \"input_usd_per_mtok\": 0.1, \"cached_input_usd_per_mtok\": 0.025, \"output_usd_per_mtok\": 0.4},\n"
    "    {\"providers\": [\"openai\"], \"model\": \"gpt-4o\", \"input_usd_per_mtok\": 2.5, \"cached_input_usd_per_mtok\": 1.25, \"output_usd_per_mtok\": 10.0},\n"
    "    {\"providers\": [\"openai\"], \"model\": \"gpt-4o-mini\", \"input_usd_per_mtok\": 0.15, \"cached_input_usd_per_mtok\": 0.075, \"output_usd_per_mtok\": 0.6},\n"
    "    {\"providers\": [\"openai\"], \"model\": \"o3\", \"input_usd_per_mtok\": 2.0, \"cached_input_usd_per_mtok\": 0.5, \"output_usd_per_mtok\": 8.0},\n"
    "    {\"providers\": [\"openai\"], \"model\": \"o4-mini\", \"input_usd_per_mtok\": 1.1, \"cached_input_usd_per_mtok\": 0.275, \"output_usd_per_mtok\": 4.4},\n"
    "    {\"providers\": [\"anthropic\"], \"model\": \"claude-opus-4-5\", \"input_usd_per_mtok\": 5.0, \"cached_input_usd_per_mtok\": 0.5, \"cache_write_usd_per_mtok\": 6.25, \"output_usd_per_mtok\": 25.0},\n"
    "    {\"providers\": [\"anthropic\"], \"model\": \"claude-opus-4-1\", \"input_usd_per_mtok\": 15.0, \"cached_input_usd_per_mtok\": 1.5, \"cache_write_usd_per_mtok\": 18.75, \"output_usd_per_mtok\": 75.0},\n"
    "    {\"providers\": [\"anthropic\"], \"model\": \"claude-opus-4\", \"input_usd_per_mtok\": 15.0, \"cached_input_usd_per_mtok\": 1.5, \"cache_write_usd_per_mtok\": 18.75, \"output_usd_per_mtok\": 75.0},\n"
    "    {\"providers\": [\"anthropic\"], \"model\": \"claude-sonnet-4-5\", \"input_usd_per_mtok\": 3.0, \"cached_input_usd_per_mtok\": 0.3, \"cache_write_usd_per_mtok\": 3.75, \"output_usd_per_mtok\": 15.0},\n"
    "    {\"providers\": [\"anthropic\"], \"model\": \"claude-sonnet-4\", \"input_usd_per_mtok\": 3.0, \"cached_input_usd_per_mtok\": 0.3, \"cache_write_usd_per_mtok\": 3.75, \"output_usd_per_mtok\": 15.0},\n"
    "    {\"providers\": [\"anthropic\"], \"model\": \"claude-haiku-4-5\", \"input_usd_per_mtok\": 1.0, \"cached_input_usd_per_mtok\": 0.1, \"cache_write_usd_per_mtok\": 1.25, \"output_usd_per_mtok\": 5.0},\n"
    "    {\"providers\": [\"anthropic\"], \"model\": \"claude-3-5-haiku\", \"input_usd_per_mtok\": 0.8, \"cached_input_usd_per_mtok\": 0.08, \"cache_write_usd_per_mtok\": 1.0, \"output_usd_per_mtok\": 4.0}\n"
    "  ]\n"
    "}\n";
