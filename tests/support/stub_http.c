/* libcurl request helper for tests; see stub_http.h. */
#include "tests/support/stub_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "tests/support/contract_record.h"

#define BODY_LIMIT (64u * 1024u * 1024u)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void init_curl(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct evd_buf *b = userdata;
    return evd_buf_append(b, ptr, size * nmemb) == 0 ? size * nmemb : 0;
}

static char *take(struct evd_buf *b)
{
    char *s = b->data != NULL ? b->data : strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

int evd_test_http(const char *method, const char *url, const char *body, const char *const *headers,
                  long timeout_ms, struct evd_test_http_resp *r)
{
    struct evd_buf data = {.limit = BODY_LIMIT}, head = {.limit = BODY_LIMIT};
    struct curl_slist *list = NULL;
    bool has_ct = false;
    memset(r, 0, sizeof(*r));
    pthread_once(&curl_once, init_curl);
    CURL *h = curl_easy_init();
    if (h == NULL) {
        r->curl_code = CURLE_FAILED_INIT;
        goto out;
    }
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
        has_ct = has_ct || strncasecmp(headers[i], "Content-Type:", 13) == 0;
        list = curl_slist_append(list, headers[i]);
    }
    if (body != NULL && !has_ct)
        list = curl_slist_append(list, "Content-Type: application/json");
    list = curl_slist_append(list, "Expect:"); /* no 100-continue round trip */
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 30000L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &data);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &head);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    int64_t t0 = evd_mono_ms();
    r->curl_code = (int)curl_easy_perform(h);
    r->elapsed_ms = (long)(evd_mono_ms() - t0);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
out:
    r->len = data.len;
    r->body = take(&data);
    r->headers = take(&head);
    /* Only exchanges with an evald under test are recorded (never the stub's own). */
    if (r->curl_code == 0)
        evd_t_contract_record(method, url, headers, body ? strlen(body) : 0, r->status, r->headers,
                              r->body, r->len);
    if (r->body != NULL && r->len > 0)
        r->json = json_loadb(r->body, r->len, 0, NULL);
    curl_slist_free_all(list);
    if (h != NULL)
        curl_easy_cleanup(h);
    return r->curl_code;
}

char *evd_test_http_header(const struct evd_test_http_resp *r, const char *name)
{
    size_t n = strlen(name);
    const char *line = r->headers;
    while (line != NULL && *line != '\0') {
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t len = strcspn(v, "\r\n");
            return strndup(v, len);
        }
        line = strchr(line, '\n');
        if (line != NULL)
            line++;
    }
    return NULL;
}

void evd_test_http_resp_free(struct evd_test_http_resp *r)
{
    free(r->body);
    free(r->headers);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}
