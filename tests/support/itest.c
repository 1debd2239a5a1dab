/* See itest.h. Children get their own process group so a kill reaches them all. */
#define _GNU_SOURCE /* pipe2 */
#include "tests/support/itest.h"

#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/contract_record.h"

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "itest: %s%s\n", what, detail);
    exit(1);
}

const char *evd_t_source_dir(void)
{
    const char *s = getenv("EVALD_SOURCE_DIR");
    return s ? s : EVALD_SOURCE_DIR;
}

void evd_t_pg_cleanup_at_exit(const char *dir)
{
    /* Everything the waiter needs is made before the fork: it runs only async-signal-safe
     * calls until it execs the shell. */
    char cmd[1024];
    int len = snprintf(cmd, sizeof(cmd),
                       "test -d %s || exit 0; %s/scripts/pg.sh stop %s >/dev/null 2>&1; rm -rf %s",
                       dir, evd_t_source_dir(), dir, dir);
    int p[2];
    if (len < 0 || len >= (int)sizeof(cmd) || pipe2(p, O_CLOEXEC) != 0)
        die("", "could not arrange the cleanup of a private PostgreSQL cluster");
    pid_t pid = fork();
    if (pid < 0)
        die("", "could not arrange the cleanup of a private PostgreSQL cluster");
    if (pid == 0) {
        /* Out of the test's process group: Check kills that group when a test ends. */
        setsid();
        close(p[1]);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        if (dup2(p[0], 3) < 0)
            _exit(1);
        closefrom(4); /* no copy of a pipe or socket of the test's stays open in here */
        for (;;) { /* until the end of file: the test's process is gone */
            char c;
            ssize_t r = read(3, &c, 1);
            if (r == 0 || (r < 0 && errno != EINTR))
                break;
        }
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(1);
    }
    close(p[0]); /* the write end is close-on-exec: the programs this process starts do not
                  * hold it, or the end of file would wait for them */
}

const char *evd_t_evald_bin(void)
{
    const char *bin = getenv("EVALD_BIN");
    if (bin == NULL || *bin == '\0')
        die("", "EVALD_BIN is not set (run the tests through ctest or make test)");
    return bin;
}

const char *evd_t_pg_admin_url(void)
{
    const char *u = getenv("EVALD_TEST_DATABASE_URL");
    if (u == NULL || *u == '\0')
        u = getenv("EVALD_DATABASE_URL");
    if (u == NULL || *u == '\0')
        die("", "set EVALD_TEST_DATABASE_URL or EVALD_DATABASE_URL to a PostgreSQL server "
                "where databases may be created (`make test` starts one)");
    return u;
}

/* Rebuilds a keyword conninfo from a live connection with another dbname. */
static void conninfo_with_db(PGconn *c, const char *db, char *out, size_t n)
{
    PQconninfoOption *opts = PQconninfo(c);
    size_t o = 0;
    out[0] = '\0';
    for (PQconninfoOption *p = opts; p && p->keyword; p++) {
        if (p->val == NULL || *p->val == '\0' || strcmp(p->keyword, "dbname") == 0)
            continue;
        if (strcmp(p->keyword, "host") && strcmp(p->keyword, "hostaddr") &&
            strcmp(p->keyword, "port") && strcmp(p->keyword, "user") &&
            strcmp(p->keyword, "password") && strcmp(p->keyword, "sslmode"))
            continue;
        o += (size_t)snprintf(out + o, n - o, "%s='%s' ", p->keyword, p->val);
    }
    snprintf(out + o, n - o, "dbname='%s'", db);
    PQconninfoFree(opts);
}

static PGconn *admin(void)
{
    PGconn *c = PQconnectdb(evd_t_pg_admin_url());
    if (PQstatus(c) != CONNECTION_OK)
        die("cannot connect to the test database server: ", PQerrorMessage(c));
    return c;
}

void evd_t_db_create(char *url, size_t n, char *name)
{
    char id[48];
    evd_new_id("evald_t_", id, sizeof(id));
    id[8 + 16] = '\0';
    snprintf(name, 64, "%s", id);
    PGconn *c = admin();
    char sql[128];
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        die("CREATE DATABASE failed: ", PQerrorMessage(c));
    PQclear(r);
    conninfo_with_db(c, name, url, n);
    PQfinish(c);
}

void evd_t_db_drop(const char *name)
{
    PGconn *c = admin();
    char sql[160];
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
    PQclear(PQexec(c, sql));
    PQfinish(c);
}

char *evd_t_sql(const char *url, const char *sql)
{
    PGconn *c = PQconnectdb(url);
    char *out = NULL;
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult *r = PQexec(c, sql);
        ExecStatusType st = PQresultStatus(r);
        if (st == PGRES_TUPLES_OK)
            out = strdup(PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
        else if (st == PGRES_COMMAND_OK)
            out = strdup("");
        else
            fprintf(stderr, "itest: SQL failed: %s: %s", sql, PQerrorMessage(c));
        PQclear(r);
    }
    PQfinish(c);
    return out;
}

int evd_t_spawn(struct evd_t_proc *p, char *const argv[], char *const env[], bool want_ready,
                int timeout_ms)
{
    memset(p, 0, sizeof(*p));
    int out[2];
    if (pipe(out) != 0)
        return -1;
    /* Logs go under the build folder (EVALD_TEST_LOG_DIR) so they go away with it. */
    char tmpl[600];
    const char *logdir = getenv("EVALD_TEST_LOG_DIR");
    if (logdir == NULL || mkdir(logdir, 0755) != 0)
        logdir = logdir && access(logdir, W_OK) == 0 ? logdir : "/tmp";
    snprintf(tmpl, sizeof(tmpl), "%s/evald-itest-XXXXXX", logdir);
    int logfd = mkstemp(tmpl);
    snprintf(p->log_path, sizeof(p->log_path), "%s", tmpl);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* Die with the test process: Check's forked test _exits at a failed assertion,
         * before its teardown, and would otherwise leave its evald and stub running. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        setpgid(0, 0);
        dup2(out[1], STDOUT_FILENO);
        if (logfd >= 0)
            dup2(logfd, STDERR_FILENO);
        close(out[0]);
        for (size_t i = 0; env && env[i]; i++)
            putenv(env[i]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(out[1]);
    if (logfd >= 0)
        close(logfd);
    p->pid = pid;
    if (!want_ready) {
        close(out[0]);
        return 0;
    }
    char buf[512];
    size_t len = 0;
    int64_t deadline = evd_mono_ms() + timeout_ms;
    while (evd_mono_ms() < deadline && len < sizeof(buf) - 1) {
        struct pollfd pfd = {.fd = out[0], .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t n = read(out[0], buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        if (strchr(buf, '\n') != NULL) {
            json_t *j = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
            const char *l = json_string_value(json_object_get(j, "listen"));
            if (l != NULL) {
                snprintf(p->listen, sizeof(p->listen), "%s", l);
                snprintf(p->base, sizeof(p->base), "http://%s", l);
            }
            json_decref(j);
            break;
        }
    }
    close(out[0]);
    if (p->listen[0] == '\0') {
        evd_t_dump_log(p);
        evd_t_stop(p, SIGKILL, 2000);
        return -1;
    }
    /* Exchanges with evald (not with the stub) are recorded for the contract check. */
    const char *evald = getenv("EVALD_BIN");
    if (evald != NULL && strcmp(argv[0], evald) == 0)
        evd_t_contract_note_evald(p->base);
    return 0;
}

int evd_t_evald_start(struct evd_t_proc *p, const char *db_url, char *const extra_env[])
{
    static char dburl[1024];
    snprintf(dburl, sizeof(dburl), "EVALD_DATABASE_URL=%s", db_url);
    char *env[32];
    size_t n = 0;
    env[n++] = dburl;
    /* A free port, unless the caller names its own (the first of a name is the one read). */
    bool listen = false;
    for (size_t i = 0; extra_env && extra_env[i]; i++)
        listen |= strncmp(extra_env[i], "EVALD_LISTEN=", 13) == 0;
    if (!listen)
        env[n++] = "EVALD_LISTEN=127.0.0.1:0";
    for (size_t i = 0; extra_env && extra_env[i] && n < 30; i++)
        env[n++] = extra_env[i];
    env[n] = NULL;
    char *argv[] = {(char *)evd_t_evald_bin(), NULL};
    return evd_t_spawn(p, argv, env, true, 30000);
}

/*
 * A sanitizer build (make test-tsan) must fail the suite on any report of a child's, even
 * one from a process the test then kills on purpose: the reports are on its stderr log,
 * written as they happen, so the log is read once the child is gone.
 */
static void fail_on_sanitizer_report(const struct evd_t_proc *p)
{
    FILE *f = fopen(p->log_path, "r");
    if (f == NULL)
        return;
    char line[2048];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, "WARNING: ThreadSanitizer") != NULL;
    if (!found) {
        fclose(f);
        return;
    }
    /* The report's own lines, without evald's JSON log lines between them. */
    fprintf(stderr, "itest: a child reported a ThreadSanitizer warning (whole log: %s)\n%s",
            p->log_path, line);
    for (int n = 0; n < 200 && fgets(line, sizeof(line), f);)
        if (line[0] != '{') {
            fputs(line, stderr);
            n++;
        }
    fclose(f);
    exit(66);
}

int evd_t_wait(struct evd_t_proc *p, int timeout_ms)
{
    int64_t deadline = evd_mono_ms() + timeout_ms;
    while (evd_mono_ms() < deadline) {
        int st;
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) {
            p->pid = 0;
            evd_t_contract_forget(p->base);
            fail_on_sanitizer_report(p);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10000);
    }
    return -1;
}

int evd_t_stop(struct evd_t_proc *p, int sig, int timeout_ms)
{
    if (p->pid <= 0)
        return -1;
    kill(p->pid, sig);
    int rc = evd_t_wait(p, timeout_ms);
    if (rc < 0 && p->pid > 0) {
        kill(-p->pid, SIGKILL);
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        p->pid = 0;
        evd_t_contract_forget(p->base);
        fail_on_sanitizer_report(p);
    }
    return rc;
}

void evd_t_dump_log(const struct evd_t_proc *p)
{
    FILE *f = fopen(p->log_path, "r");
    if (f == NULL)
        return;
    fprintf(stderr, "---- %s ----\n", p->log_path);
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof(line), f) && n++ < 200)
        fputs(line, stderr);
    fclose(f);
}

int evd_t_log_count(const struct evd_t_proc *p, const char *text)
{
    FILE *f = fopen(p->log_path, "r");
    if (f == NULL)
        return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strstr(line, text) != NULL;
    fclose(f);
    return n;
}

/* Response bodies and header blocks are bounded like every buffer that grows from input. */
#define RESP_LIMIT (64u * 1024u * 1024u)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void init_curl(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud)
{
    return evd_buf_append(ud, ptr, size * nmemb) == 0 ? size * nmemb : 0;
}

/* The buffer's bytes as a NUL-terminated string the caller frees; the buffer is emptied. */
static char *take(struct evd_buf *b)
{
    char *s = b->data != NULL ? b->data : strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

bool evd_t_resp_header(const struct evd_t_resp *r, const char *name, char *out, size_t n)
{
    bool found = false;
    size_t nl = strlen(name);
    out[0] = '\0';
    for (const char *l = r->headers; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
            const char *v = l + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vl = strcspn(v, "\r\n");
            snprintf(out, n, "%.*s", (int)vl, v);
            found = true;
        }
    }
    return found;
}

int evd_t_http_timed(const char *method, const char *url, const char *const *headers,
                     const char *body, size_t body_len, long timeout_ms, struct evd_t_resp *out)
{
    struct evd_buf data = {.limit = RESP_LIMIT}, head = {.limit = RESP_LIMIT};
    struct curl_slist *hl = NULL;
    bool has_ct = false;
    memset(out, 0, sizeof(*out));
    pthread_once(&curl_once, init_curl);
    CURL *c = curl_easy_init();
    if (c == NULL) {
        out->curl_code = CURLE_FAILED_INIT;
        goto out;
    }
    for (size_t i = 0; headers && headers[i]; i++) {
        hl = curl_slist_append(hl, headers[i]);
        has_ct |= strncasecmp(headers[i], "Content-Type:", 13) == 0;
    }
    if (body != NULL && !has_ct)
        hl = curl_slist_append(hl, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Expect:"); /* no 100-continue round trip */
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 60000L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &data);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &head);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    int64_t t0 = evd_mono_ms();
    out->curl_code = (int)curl_easy_perform(c);
    out->elapsed_ms = (long)(evd_mono_ms() - t0);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
out:
    out->len = data.len;
    out->body = take(&data);
    out->headers = take(&head);
    /* Only exchanges with an evald under test are recorded (never the stub's own). */
    if (out->curl_code == CURLE_OK)
        evd_t_contract_record(method, url, headers, body ? body_len : 0, out->status, out->headers,
                              out->body, out->len);
    if (out->len > 0)
        out->json = json_loadb(out->body, out->len, 0, NULL);
    evd_t_resp_header(out, "Content-Type", out->content_type, sizeof(out->content_type));
    evd_t_resp_header(out, "X-Request-Id", out->request_id, sizeof(out->request_id));
    evd_t_resp_header(out, "Location", out->location, sizeof(out->location));
    curl_slist_free_all(hl);
    if (c != NULL)
        curl_easy_cleanup(c);
    return out->curl_code == CURLE_OK ? 0 : -1;
}

int evd_t_http(const char *method, const char *url, const char *const *headers, const char *body,
               size_t body_len, struct evd_t_resp *out)
{
    return evd_t_http_timed(method, url, headers, body, body_len, 0, out);
}

json_t *evd_t_http_json(const char *method, const char *url, const char *body, long *status)
{
    struct evd_t_resp r;
    json_t *j = NULL;
    if (evd_t_http(method, url, NULL, body, body ? strlen(body) : 0, &r) == 0)
        j = r.json != NULL ? json_incref(r.json) : json_loads(r.body, JSON_DECODE_ANY, NULL);
    if (status)
        *status = r.status;
    evd_t_resp_free(&r);
    return j;
}

void evd_t_resp_free(struct evd_t_resp *r)
{
    free(r->body);
    free(r->headers);
    json_decref(r->json);
    r->body = r->headers = NULL;
    r->json = NULL;
}

bool evd_t_wait_status(const char *url, long want_status, int timeout_ms)
{
    int64_t deadline = evd_mono_ms() + timeout_ms;
    while (evd_mono_ms() < deadline) {
        struct evd_t_resp r;
        evd_t_http("GET", url, NULL, NULL, 0, &r);
        evd_t_resp_free(&r);
        if (r.status == want_status)
            return true;
        usleep(50000);
    }
    return false;
}

unsigned evd_t_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(s, (struct sockaddr *)&a, sizeof(a));
    socklen_t l = sizeof(a);
    getsockname(s, (struct sockaddr *)&a, &l);
    close(s);
    return ntohs(a.sin_port);
}

/* ---- helpers for suites that run evaluations ---- */

#include "schema/jsonschema.h"
#include "tests/support/testutil.h"

int evd_t_stub_start(struct evd_t_proc *p, const char *script_json, const char *require_key)
{
    memset(p, 0, sizeof(*p));
    const char *bin = getenv("EVALD_STUB_BIN");
    if (bin == NULL || access(bin, X_OK) != 0) {
        fprintf(stderr,
                "itest: evald-stub not found (EVALD_STUB_BIN=%s); run the tests "
                "through ctest or make test\n",
                bin ? bin : "");
        return -1;
    }
    char path[] = "/tmp/evald-stub-script-XXXXXX";
    char *argv[] = {(char *)bin, "--listen", "127.0.0.1:0", NULL, NULL, NULL};
    if (script_json != NULL) {
        int fd = mkstemp(path);
        size_t len = strlen(script_json);
        bool ok = fd >= 0 && write(fd, script_json, len) == (ssize_t)len;
        if (fd >= 0)
            close(fd);
        if (!ok) {
            fprintf(stderr, "itest: cannot write a stub script: %s\n", strerror(errno));
            if (fd >= 0)
                unlink(path);
            return -1;
        }
        argv[3] = "--script";
        argv[4] = path;
    }
    char key_env[512];
    char *env[] = {NULL, NULL};
    if (require_key != NULL) {
        snprintf(key_env, sizeof(key_env), "EVALD_STUB_REQUIRE_KEY=%s", require_key);
        env[0] = key_env;
    }
    int rc = evd_t_spawn(p, argv, env, true, 10000);
    if (script_json != NULL)
        unlink(path); /* read before the ready line */
    return rc;
}

/* One exchange with the stub's control surface; the response is left in *r. */
static void stub_call(const struct evd_t_proc *stub, const char *method, const char *path,
                      const char *body, struct evd_t_resp *r)
{
    char url[256];
    snprintf(url, sizeof(url), "%s%s", stub->base, path);
    evd_t_http(method, url, NULL, body, body ? strlen(body) : 0, r);
}

long evd_t_metric(const char *base, const char *name)
{
    char url[512];
    snprintf(url, sizeof(url), "%s/metrics", base);
    struct evd_t_resp r;
    if (evd_t_http("GET", url, NULL, NULL, 0, &r) != 0)
        return 0;
    long v = 0;
    size_t len = strlen(name);
    for (const char *p = r.body; p != NULL && (p = strstr(p, name)) != NULL; p++)
        if ((p == r.body || p[-1] == '\n') && p[len] == ' ')
            v = strtol(p + len + 1, NULL, 10);
    evd_t_resp_free(&r);
    return v;
}

long evd_t_stub_script(const struct evd_t_proc *stub, const char *script_json)
{
    struct evd_t_resp r;
    stub_call(stub, "PUT", "/_stub/script", script_json, &r);
    if (r.status != 200)
        fprintf(stderr, "itest: the stub refused a script (%ld): %s\n", r.status, r.body);
    evd_t_resp_free(&r);
    return r.status;
}

long evd_t_stub_reset(const struct evd_t_proc *stub)
{
    struct evd_t_resp r;
    stub_call(stub, "POST", "/_stub/reset", "", &r);
    evd_t_resp_free(&r);
    return r.status;
}

/* GET `path` of the stub: its JSON object (new reference) when it answers 200, else NULL. */
static json_t *stub_get(const struct evd_t_proc *stub, const char *path)
{
    struct evd_t_resp r;
    stub_call(stub, "GET", path, NULL, &r);
    json_t *v = r.status == 200 && json_is_object(r.json) ? json_incref(r.json) : NULL;
    evd_t_resp_free(&r);
    return v;
}

json_t *evd_t_stub_requests(const struct evd_t_proc *stub, int limit)
{
    char path[64] = "/_stub/requests";
    if (limit > 0)
        snprintf(path, sizeof(path), "/_stub/requests?limit=%d", limit);
    return stub_get(stub, path);
}

json_t *evd_t_stub_stats(const struct evd_t_proc *stub)
{
    return stub_get(stub, "/_stub/stats");
}

bool evd_t_valid_response(const char *function, const json_t *response)
{
    static bool noted;
    json_t *f = evd_test_seed_function(function);
    if (f == NULL) {
        if (!noted && evd_test_shared_dir() == NULL)
            evd_test_skip_note("validation of mirror responses against the seed contract");
        noted = true;
        return evd_test_shared_dir() == NULL;
    }
    struct evd_schema_error errs[5];
    struct evd_err err = {0};
    size_t n = evd_jsonschema_check(json_object_get(f, "response_schema"), response, errs, 5, &err);
    if (err.code != EVD_OK) {
        fprintf(stderr, "itest: the seed schema of %s does not compile: %s\n", function, err.msg);
        return false;
    }
    for (size_t i = 0; i < n && i < 5; i++)
        fprintf(stderr, "itest: %s response invalid at \"%s\": %s\n", function,
                errs[i].instance_path, errs[i].message);
    return n == 0;
}

json_t *evd_t_call(const char *base, const char *function, const char *body, long *status)
{
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/functions/%s", base, function);
    return evd_t_http_json("POST", url, body, status);
}

const char *evd_t_wait_terminal(const char *base, const char *evaluation_id, int timeout_ms)
{
    static char status[32];
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/evaluations/%s/status", base, evaluation_id);
    int64_t deadline = evd_mono_ms() + timeout_ms;
    snprintf(status, sizeof(status), "timeout");
    while (evd_mono_ms() < deadline) {
        long code = 0;
        json_t *s = evd_t_http_json("GET", url, NULL, &code);
        const char *st = json_string_value(json_object_get(s, "status"));
        if (st && (!strcmp(st, "completed") || !strcmp(st, "failed") || !strcmp(st, "cancelled"))) {
            snprintf(status, sizeof(status), "%s", st);
            json_decref(s);
            return status;
        }
        json_decref(s);
        usleep(50000);
    }
    return status;
}

const char *evd_t_start_experiment(const char *base, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    ck_assert_ptr_nonnull(text);
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/experiments", base);
    long status = 0;
    json_t *r = evd_t_http_json("POST", url, text, &status);
    free(text);
    ck_assert_msg(status == 202, "start answered %ld", status);
    static char id[64];
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(r, "experiment_id")));
    json_decref(r);
    return id;
}

json_t *evd_t_wait_experiment(const char *base, const char *id, int timeout_ms)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/experiments/%s", base, id);
    for (int waited = 0; waited < timeout_ms; waited += 100) {
        long status = 0;
        json_t *doc = evd_t_http_json("GET", url, NULL, &status);
        const char *st = json_string_value(json_object_get(doc, "status"));
        if (status == 200 && st && strcmp(st, "queued") != 0 && strcmp(st, "running") != 0)
            return doc;
        json_decref(doc);
        usleep(100 * 1000);
    }
    ck_abort_msg("experiment %s did not finish in %d ms", id, timeout_ms);
    return NULL;
}
