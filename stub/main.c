/*
 * evald-stub entry point: reads the configuration table (defaults < environment <
 * flags), loads the script, starts the server, prints one JSON ready line on stdout
 * and waits for SIGTERM or SIGINT. Signals are blocked in every thread and taken
 * with sigwait here, so no handler runs concurrently with the server.
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "stub/stub.h"

#define MAX_BODY_DEFAULT (8u * 1024u * 1024u)

struct option_row {
    const char *flag;
    const char *env;
    const char *def;
    const char *help;
    const char *value; /* resolved */
};

enum { OPT_LISTEN, OPT_SCRIPT, OPT_KEY, OPT_LOG, OPT_COUNT };

static struct option_row options[OPT_COUNT] = {
    [OPT_LISTEN] = {"--listen", "EVALD_STUB_LISTEN", "127.0.0.1:8090",
                    "address:port to serve; port 0 picks a free port", NULL},
    [OPT_SCRIPT] = {"--script", "EVALD_STUB_SCRIPT", NULL,
                    "JSON script of rules (docs/stub.md); none: built-in replies", NULL},
    [OPT_KEY] = {"--require-key", "EVALD_STUB_REQUIRE_KEY", NULL,
                 "API key clients must send (Bearer or x-api-key); none: any", NULL},
    [OPT_LOG] = {"--log-level", "EVALD_STUB_LOG_LEVEL", "info", "debug, info, warn or error", NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: evald-stub [options]\n"
               "Scriptable OpenAI / Anthropic model server for evald's tests and demo.\n\n");
    for (int i = 0; i < OPT_COUNT; i++)
        fprintf(f, "  %-15s %-24s %s (default: %s)\n", options[i].flag, options[i].env,
                options[i].help, options[i].def != NULL ? options[i].def : "unset");
    fprintf(f, "  %-15s %-24s %s\n", "--help", "", "print this help and exit");
}

/* Returns 0, 1 for --help, or -1 after printing an error. */
static int parse_args(int argc, char **argv)
{
    for (int i = 0; i < OPT_COUNT; i++) {
        const char *env = getenv(options[i].env);
        options[i].value = env != NULL && env[0] != '\0' ? env : options[i].def;
    }
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0)
            return 1;
        int found = -1;
        const char *val = NULL;
        for (int i = 0; i < OPT_COUNT && found < 0; i++) {
            size_t n = strlen(options[i].flag);
            if (strncmp(argv[a], options[i].flag, n) != 0)
                continue;
            if (argv[a][n] == '=') {
                found = i;
                val = argv[a] + n + 1;
            } else if (argv[a][n] == '\0') {
                found = i;
                if (a + 1 >= argc) {
                    fprintf(stderr, "evald-stub: %s needs a value\n", options[i].flag);
                    return -1;
                }
                val = argv[++a];
            }
        }
        if (found < 0) {
            fprintf(stderr, "evald-stub: unknown option \"%s\" (see --help)\n", argv[a]);
            return -1;
        }
        options[found].value = val;
    }
    return 0;
}

static struct stub_script *load_script(const char *path)
{
    if (path == NULL)
        return stub_script_builtin();
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (doc == NULL) {
        char line[16];
        snprintf(line, sizeof(line), "%d", jerr.line);
        evd_log(EVD_LOG_ERROR, "cannot load the script", "path", path, "line", line, "error",
                jerr.text, NULL);
        return NULL;
    }
    struct evd_err err = {0};
    struct stub_script *s = stub_script_parse(doc, &err);
    json_decref(doc);
    if (s == NULL)
        evd_log(EVD_LOG_ERROR, "invalid script", "path", path, "error", err.msg, NULL);
    return s;
}

int main(int argc, char **argv)
{
    int rc = parse_args(argc, argv);
    if (rc != 0) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    int level = evd_log_level_parse(options[OPT_LOG].value);
    if (level < 0) {
        fprintf(stderr, "evald-stub: --log-level must be debug, info, warn or error\n");
        return 2;
    }
    evd_log_set_level((enum evd_log_level)level);
    json_object_seed(0);

    /* Every thread inherits this mask; only sigwait below receives the signals. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct stub_script *script = load_script(options[OPT_SCRIPT].value);
    if (script == NULL)
        return 1;
    struct stub_config cfg = {
        .listen = options[OPT_LISTEN].value,
        .script_path = options[OPT_SCRIPT].value,
        .require_key = options[OPT_KEY].value,
        .max_body = MAX_BODY_DEFAULT,
    };
    struct stub_server *srv = NULL;
    struct evd_err err = {0};
    if (stub_server_start(&cfg, script, &srv, &err) != EVD_OK) {
        evd_log(EVD_LOG_ERROR, "cannot start", "error", err.msg, NULL);
        return 1;
    }
    json_t *ready = json_pack("{s:s}", "listen", stub_server_address(srv));
    char *line = ready != NULL ? json_dumps(ready, JSON_COMPACT) : NULL;
    json_decref(ready);
    if (line != NULL) {
        printf("%s\n", line);
        fflush(stdout);
        free(line);
    }
    evd_log(EVD_LOG_INFO, "listening", "listen", stub_server_address(srv), "script",
            cfg.script_path != NULL ? cfg.script_path : "built-in", "auth",
            cfg.require_key != NULL ? "required" : "off", NULL);

    int sig = 0;
    sigwait(&set, &sig);
    evd_log(EVD_LOG_INFO, "stopping", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT", NULL);
    stub_server_stop(srv);
    return 0;
}
