// The OTEL_* variables are checked at start: evald refuses an invalid value with exit
// status 2 and a log line naming the variable, never quoting a header's value, before it
// touches the database. A valid configuration starts (and stops) as usual. Real evald.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { createDatabase, runEvaldToExit, startEvald, startStub } from './e2e_support.mjs';

let db;

before(() => {
    db = createDatabase();
});

after(() => {
    db?.drop();
});

// [variable, value, what the case is, secrets that must not appear in the log]
const INVALID = [
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc', 'an unknown protocol', []],
    ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'http/xml', 'an unknown protocol', []],
    ['OTEL_BSP_MAX_QUEUE_SIZE', '-3', 'a negative number', []],
    ['OTEL_BSP_SCHEDULE_DELAY', '200ms', 'a number with a unit', []],
    ['OTEL_BSP_MAX_EXPORT_BATCH_SIZE', '1.5', 'a fraction', []],
    ['OTEL_EXPORTER_OTLP_TIMEOUT', 'soon', 'not a number', []],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'ftp://x', 'an endpoint that is not http(s)', []],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'not a url', 'an endpoint that is not a URL', []],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'novalue', 'a pair without "="', ['novalue']],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'Authorization=Bearer%20hdr-sekrit-991,brokenpair-sekrit-77',
        'a valid pair, then a malformed one', ['hdr-sekrit-991', 'brokenpair-sekrit-77']],
    ['OTEL_EXPORTER_OTLP_TRACES_HEADERS', 'x-api-key=tr-sekrit-55,=nokey', 'a pair without a key', ['tr-sekrit-55']],
    ['OTEL_RESOURCE_ATTRIBUTES', 'team', 'a pair without "="', []],
];

for (const [name, value, what, secrets] of INVALID) {
    test(`${name} with ${what} (${secrets.length ? 'value withheld' : value}) is refused at start with exit status 2`, async () => {
        const r = await runEvaldToExit({
            EVALD_DATABASE_URL: db.url,
            EVALD_LISTEN: '127.0.0.1:0',
            // A valid endpoint beside the invalid value, so that the value itself is refused.
            ...(name.includes('ENDPOINT') ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' }),
            [name]: value,
        });
        assert.equal(r.code, 2, `evald exited with ${r.code} (signal ${r.signal}); stderr:\n${r.stderr}`);
        assert.ok(!r.stdout.includes('"listen"'), 'evald started listening');
        assert.ok(r.stderr.includes(name), `the log does not name ${name}:\n${r.stderr}`);
        for (const s of secrets) assert.ok(!r.stderr.includes(s), `the log echoes a header value (${s}):\n${r.stderr}`);
        const lines = r.stderr.trim().split('\n');
        for (const l of lines) assert.doesNotThrow(() => JSON.parse(l), `a log line is not JSON: ${l}`);
    });
}

test('a valid configuration starts, and the header is still never logged', async () => {
    const stub = await startStub();
    const evald = await startEvald({
        db, stub,
        env: {
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/v1/traces',
            OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'Authorization=Basic%20cGs6c2s%3D-valid-sekrit',
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
            OTEL_BSP_SCHEDULE_DELAY: '0',
            OTEL_EXPORTER_OTLP_TIMEOUT: '300',
            OTEL_RESOURCE_ATTRIBUTES: 'a=b',
        },
    });
    try {
        const stopped = await evald.stop();
        assert.equal(stopped.code, 0, `evald exits 0 at SIGTERM: ${JSON.stringify(stopped)}`);
        assert.ok(!evald.stderr.includes('valid-sekrit') && !evald.stderr.includes('cGs6c2s'), 'the log holds the header value');
    } finally {
        await evald.stop();
        await stub.stop();
    }
});
