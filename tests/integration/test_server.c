/*
 * Integration tests of the foundation: the real evald binary against a real
 * PostgreSQL over loopback HTTP. Each test makes its own database.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/itest.h"
#include "tests/support/testutil.h"

static char db_url[1024];
static char db_name[64];

static void setup(void)
{
    evd_t_db_create(db_url, sizeof(db_url), db_name);
}

static void teardown(void)
{
    evd_t_db_drop(db_name);
}

static void url_of(const struct evd_t_proc *p, const char *path, char *out, size_t n)
{
    snprintf(out, n, "%s%s", p->base, path);
}

static void assert_problem(const struct evd_t_resp *r, long status, const char *code)
{
    ck_assert_int_eq(r->status, status);
    ck_assert_str_eq(r->content_type, "application/problem+json");
    json_t *j = json_loads(r->body, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "code")), code);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), status);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(j, "detail")));
    json_decref(j);
    ck_assert(r->request_id[0] != '\0');
}

START_TEST(health_ready_and_errors)
{
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, db_url, NULL), 0);
    char url[256];
    struct evd_t_resp r;

    url_of(&p, "/healthz", url, sizeof(url));
    ck_assert_int_eq(evd_t_http("GET", url, NULL, NULL, 0, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert(strncmp(r.request_id, "req_", 4) == 0);
    evd_t_resp_free(&r);

    const char *rid[] = {"X-Request-Id: trace-abc.123", NULL};
    ck_assert_int_eq(evd_t_http("GET", url, rid, NULL, 0, &r), 0);
    ck_assert_str_eq(r.request_id, "trace-abc.123");
    evd_t_resp_free(&r);

    url_of(&p, "/readyz", url, sizeof(url));
    json_t *ready = evd_t_http_json("GET", url, NULL, &r.status);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(json_string_value(json_object_get(ready, "status")), "ok");
    ck_assert_str_eq(json_string_value(json_object_get(ready, "database")), "ok");
    ck_assert_str_eq(json_string_value(json_object_get(ready, "migrations")), "ok");
    json_decref(ready);

    url_of(&p, "/v1/no/such/route", url, sizeof(url));
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    assert_problem(&r, 404, "not_found");
    evd_t_resp_free(&r);

    /* 2 MiB body: 413, and the server stays healthy. */
    size_t big = 2 * 1024 * 1024;
    char *body = malloc(big + 1);
    memset(body, ' ', big);
    body[0] = '{';
    body[big - 1] = '}';
    body[big] = '\0';
    url_of(&p, "/v1/functions/eval::status", url, sizeof(url));
    evd_t_http("POST", url, NULL, body, big, &r);
    assert_problem(&r, 413, "payload_too_large");
    evd_t_resp_free(&r);
    free(body);

    evd_t_http("POST", url, NULL, "{\"evaluation_id\": ", 18, &r);
    assert_problem(&r, 400, "invalid_request");
    ck_assert(strstr(r.body, "malformed JSON") != NULL);
    evd_t_resp_free(&r);

    const char *xml[] = {"Content-Type: text/xml", NULL};
    evd_t_http("POST", url, xml, "<a/>", 4, &r);
    assert_problem(&r, 415, "unsupported_media_type");
    evd_t_resp_free(&r);

    url_of(&p, "/v1/functions/eval::nope", url, sizeof(url));
    evd_t_http("POST", url, NULL, "{}", 2, &r);
    assert_problem(&r, 404, "not_found");
    evd_t_resp_free(&r);

    url_of(&p, "/healthz", url, sizeof(url));
    ck_assert(evd_t_wait_status(url, 200, 2000));

    url_of(&p, "/metrics", url, sizeof(url));
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert(strstr(r.body, "evald_http_requests_total{route=\"/healthz\",method=\"GET\","
                            "status=\"200\"}") != NULL);
    ck_assert(strstr(r.body, "status=\"413\"") != NULL);
    ck_assert(strstr(r.body, "evald_db_pool_in_use") != NULL);
    evd_t_resp_free(&r);

    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(function_catalogue_and_console)
{
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, db_url, NULL), 0);
    char url[256];
    long status = 0;
    url_of(&p, "/v1/functions", url, sizeof(url));
    json_t *cat = evd_t_http_json("GET", url, NULL, &status);
    ck_assert_int_eq(status, 200);
    json_t *fns = json_object_get(cat, "functions");
    ck_assert(json_array_size(fns) >= 13);
    size_t i;
    json_t *f;
    int seen_start = 0;
    json_array_foreach(fns, i, f)
    {
        ck_assert(json_is_string(json_object_get(f, "description")));
        ck_assert(json_is_object(json_object_get(f, "request_schema")));
        ck_assert(json_is_object(json_object_get(f, "response_schema")));
        seen_start |= strcmp(json_string_value(json_object_get(f, "name")), "eval::start") == 0;
    }
    ck_assert(seen_start);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_array_get(json_object_get(cat, "triggers"), 0),
                                          "name")),
        "eval::completed");
    json_decref(cat);

    url_of(&p, "/v1/functions/eval::ui-content", url, sizeof(url));
    json_t *ui = evd_t_http_json("POST", url, "{\"path\":\"index.html\"}", &status);
    ck_assert_int_eq(status, 200);
    ck_assert_str_eq(json_string_value(json_object_get(ui, "content_type")),
                     "text/html; charset=utf-8");
    ck_assert(strstr(json_string_value(json_object_get(ui, "content")), "<html") != NULL);
    json_decref(ui);

    struct evd_t_resp r;
    url_of(&p, "/", url, sizeof(url));
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "text/html; charset=utf-8");
    ck_assert(strstr(r.headers, "ETag: \"") != NULL);
    evd_t_resp_free(&r);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);
}
END_TEST

START_TEST(bearer_token_required_on_v1)
{
    char *env[] = {"EVALD_API_TOKEN=secret-token-0123456789", NULL};
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, db_url, env), 0);
    char url[256];
    struct evd_t_resp r;
    url_of(&p, "/v1/functions", url, sizeof(url));
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    assert_problem(&r, 401, "unauthorized");
    ck_assert(strstr(r.headers, "WWW-Authenticate: Bearer") != NULL);
    evd_t_resp_free(&r);

    const char *wrong[] = {"Authorization: Bearer secret-token-0123456780", NULL};
    evd_t_http("GET", url, wrong, NULL, 0, &r);
    assert_problem(&r, 401, "unauthorized");
    evd_t_resp_free(&r);

    const char *right[] = {"Authorization: Bearer secret-token-0123456789", NULL};
    evd_t_http("GET", url, right, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);

    url_of(&p, "/healthz", url, sizeof(url));
    evd_t_http("GET", url, NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 200);
    evd_t_resp_free(&r);
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);

    /* The token never reaches the log. */
    FILE *f = fopen(p.log_path, "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    while (fgets(line, sizeof(line), f))
        ck_assert_msg(strstr(line, "secret-token") == NULL, "token logged: %s", line);
    fclose(f);
}
END_TEST

START_TEST(refuses_non_loopback_without_token)
{
    static char dburl[1100];
    snprintf(dburl, sizeof(dburl), "EVALD_DATABASE_URL=%s", db_url);
    char *env[] = {dburl, "EVALD_LISTEN=0.0.0.0:0", NULL};
    char *argv[] = {(char *)evd_t_evald_bin(), NULL};
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_spawn(&p, argv, env, false, 0), 0);
    ck_assert_int_eq(evd_t_wait(&p, 10000), 2);
    FILE *f = fopen(p.log_path, "r");
    char line[512] = "";
    ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
    fclose(f);
    ck_assert(strstr(line, "EVALD_API_TOKEN") != NULL);

    char *env2[] = {dburl, "EVALD_WORKERS=zero", NULL};
    ck_assert_int_eq(evd_t_spawn(&p, argv, env2, false, 0), 0);
    ck_assert_int_eq(evd_t_wait(&p, 10000), 2);
}
END_TEST

START_TEST(concurrent_start_applies_each_migration_once)
{
    struct evd_t_proc a, b;
    /* Start both before waiting for either: they race on the empty database. */
    static char dburl[1100];
    snprintf(dburl, sizeof(dburl), "EVALD_DATABASE_URL=%s", db_url);
    char *env[] = {dburl, "EVALD_LISTEN=127.0.0.1:0", NULL};
    char *argv[] = {(char *)evd_t_evald_bin(), NULL};
    ck_assert_int_eq(evd_t_spawn(&a, argv, env, false, 0), 0);
    ck_assert_int_eq(evd_t_evald_start(&b, db_url, NULL), 0);
    /* a was spawned without reading its ready line: wait for it through the database. */
    char url[256];
    url_of(&b, "/readyz", url, sizeof(url));
    ck_assert(evd_t_wait_status(url, 200, 20000));
    char *count = evd_t_sql(db_url, "SELECT count(*) FROM schema_migrations");
    char *distinct = evd_t_sql(db_url, "SELECT count(DISTINCT version) FROM schema_migrations");
    ck_assert_ptr_nonnull(count);
    ck_assert_str_eq(count, distinct);
    ck_assert_int_ge(atoi(count), 1);
    free(count);
    free(distinct);
    ck_assert_int_eq(evd_t_stop(&b, SIGTERM, 10000), 0);
    ck_assert_int_eq(evd_t_stop(&a, SIGTERM, 10000), 0);
    /* Both logs together record each migration applied exactly once. */
    int applied = 0;
    const char *logs[] = {a.log_path, b.log_path};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(logs[i], "r");
        char line[4096];
        while (f && fgets(line, sizeof(line), f))
            applied += strstr(line, "\"migration applied\"") != NULL;
        if (f)
            fclose(f);
    }
    char *n = evd_t_sql(db_url, "SELECT count(*) FROM schema_migrations");
    ck_assert_int_eq(applied, atoi(n));
    free(n);
}
END_TEST

/* A private cluster this test may stop and start. */
/* A raw loopback connection to p's port. */
static int connect_to(const struct evd_t_proc *p)
{
    const char *colon = strrchr(p->listen, ':');
    ck_assert_ptr_nonnull(colon);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static void send_all(int fd, const char *s)
{
    size_t n = strlen(s);
    ck_assert_int_eq(send(fd, s, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* SIGTERM with an upload half sent: a new request is refused with 503 and Connection:
 * close, the upload in flight completes, and evald exits 0. */
START_TEST(shutdown_refuses_new_requests_and_finishes_old)
{
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, db_url, NULL), 0);
    static const char body[] = "{\"vars\":{\"q\":\"one\"}}\n{\"vars\":{\"q\":\"two\"}}\n";
    char head[512];
    snprintf(head, sizeof(head),
             "POST /v1/datasets?name=late HTTP/1.1\r\nHost: 127.0.0.1\r\n"
             "Content-Type: application/x-ndjson\r\nContent-Length: %zu\r\n\r\n",
             strlen(body));
    int fd = connect_to(&p);
    send_all(fd, head);
    send_all(fd, "{\"vars\":{\"q\":\"one\"}}\n"); /* half the body */
    usleep(300 * 1000);
    ck_assert_int_eq(kill(p.pid, SIGTERM), 0);
    usleep(300 * 1000);

    char url[256];
    struct evd_t_resp r;
    url_of(&p, "/healthz", url, sizeof(url));
    ck_assert_int_eq(evd_t_http("GET", url, NULL, NULL, 0, &r), 0);
    assert_problem(&r, 503, "unavailable");
    ck_assert_ptr_nonnull(strstr(r.body, "the service is shutting down"));
    char conn[64];
    ck_assert(evd_t_resp_header(&r, "Connection", conn, sizeof(conn)));
    ck_assert_str_eq(conn, "close");
    evd_t_resp_free(&r);

    send_all(fd, body + strlen("{\"vars\":{\"q\":\"one\"}}\n"));
    char answer[4096];
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, answer + got, sizeof(answer) - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        answer[got] = '\0';
        if (strstr(answer, "\"case_count\"") != NULL)
            break;
    }
    answer[got] = '\0';
    close(fd);
    ck_assert_msg(strncmp(answer, "HTTP/1.1 201", 12) == 0, "upload answer: %s", answer);
    ck_assert_int_eq(evd_t_wait(&p, 10000), 0);
}
END_TEST

START_TEST(readyz_follows_a_database_restart)
{
    char dir[] = "/tmp/evald-pg-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    evd_t_pg_cleanup_at_exit(dir);
    unsigned port = evd_t_free_port();
    char cmd[1024], url[256], pgurl[256];
    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh start %s %u >/dev/null", evd_t_source_dir(), dir,
             port);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(pgurl, sizeof(pgurl), "postgresql://evald@127.0.0.1:%u/evald", port);
    struct evd_t_proc p;
    ck_assert_int_eq(evd_t_evald_start(&p, pgurl, NULL), 0);
    url_of(&p, "/readyz", url, sizeof(url));
    ck_assert(evd_t_wait_status(url, 200, 5000));

    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh stop %s", evd_t_source_dir(), dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_msg(evd_t_wait_status(url, 503, 10000), "readyz did not report the outage");

    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh start %s %u >/dev/null", evd_t_source_dir(), dir,
             port);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_msg(evd_t_wait_status(url, 200, 20000), "readyz did not recover");
    ck_assert_int_eq(evd_t_stop(&p, SIGTERM, 10000), 0);

    snprintf(cmd, sizeof(cmd), "%s/scripts/pg.sh stop %s; rm -rf %s", evd_t_source_dir(), dir,
             dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("server");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, health_ready_and_errors);
    tcase_add_test(tc, function_catalogue_and_console);
    tcase_add_test(tc, bearer_token_required_on_v1);
    tcase_add_test(tc, refuses_non_loopback_without_token);
    tcase_add_test(tc, concurrent_start_applies_each_migration_once);
    tcase_add_test(tc, readyz_follows_a_database_restart);
    tcase_add_test(tc, shutdown_refuses_new_requests_and_finishes_old);
    suite_add_tcase(s, tc);
    return evd_test_run_suite(s);
}
