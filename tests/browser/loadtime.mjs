// Measures how long the console takes to first render the history from a running evald
// (EVALD_URL) holding at least 1,000 evaluations. With --seed it first starts enough small
// evaluations against evald-stub (model stub-model, provider openai) to reach the count.
// Prints each sample and the median; exits 1 when the median exceeds --max-ms (default 200).
// Usage: EVALD_URL=http://127.0.0.1:8080 node loadtime.mjs [--seed] [--samples 5] [--max-ms 200] [--count 1000]
const BASE = (process.env.EVALD_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.EVALD_API_TOKEN || '';
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

function option(name, fallback) {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 && process.argv[i + 1] ? Number(process.argv[i + 1]) : fallback;
}
const SEED = process.argv.includes('--seed');
const SAMPLES = option('samples', 5);
const MAX_MS = option('max-ms', 200);
const COUNT = option('count', 1000);

if (!BASE) {
    console.log('SKIPPED: EVALD_URL is not set; loadtime needs a running evald');
    process.exit(0);
}

async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (TOKEN) headers.Authorization = `Bearer ${TOKEN}`;
    if (body) headers['Content-Type'] = 'application/json';
    const res = await fetch(`${BASE}${path}`, { method, headers, body: body ? JSON.stringify(body) : undefined });
    const data = await res.json().catch(() => null);
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${data && data.detail}`);
    return data;
}

// Counts evaluations by walking the cursor pages, stopping once `enough` are seen.
async function countEvaluations(enough) {
    let n = 0;
    let before = null;
    for (;;) {
        const q = new URLSearchParams({ limit: '100' });
        if (before) q.set('before', before);
        const page = await api('GET', `/v1/evaluations?${q}`);
        n += page.evaluations.length;
        if (n >= enough || !page.next_cursor) return n;
        before = page.next_cursor;
    }
}

let have = await countEvaluations(COUNT);
console.log(`history holds ${have >= COUNT ? `at least ${COUNT}` : have} evaluations`);
if (have < COUNT) {
    if (!SEED) {
        console.log(`note: fewer than ${COUNT} evaluations; pass --seed to create the rest against evald-stub`);
    } else {
        const missing = COUNT - have;
        console.log(`seeding ${missing} evaluations…`);
        let next = 0;
        const worker = async () => {
            while (next < missing) {
                const i = next++;
                await api('POST', '/v1/evaluations', {
                    dimension: 'prompt',
                    model: { model: 'stub-model', provider: 'openai' },
                    control: { label: `load A ${i}`, prompt: `load test prompt A ${i}` },
                    treatment: { label: `load B ${i}`, prompt: `load test prompt B ${i}` },
                    runs: 1,
                });
            }
        };
        await Promise.all(Array.from({ length: 8 }, worker));
        have = await countEvaluations(COUNT);
        console.log(`history now holds ${have >= COUNT ? `at least ${COUNT}` : have} evaluations`);
    }
}

const { chromium } = await import('playwright-core');
const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
});
const samples = [];
try {
    for (let i = 0; i < SAMPLES + 1; i++) {
        // A fresh context per sample: cold HTTP cache, like a first visit.
        const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
        if (TOKEN) await context.addInitScript((t) => sessionStorage.setItem('evald.token', t), TOKEN);
        const page = await context.newPage();
        await page.goto(`${BASE}/`);
        await page.waitForSelector('[data-testid=history-row], [data-testid=history-empty], [data-testid=history-error]', { timeout: 30000 });
        const t = await page.evaluate(() => {
            const mark = performance.getEntriesByName('evald:history-rendered')[0];
            return mark ? mark.startTime : NaN;
        });
        const rows = await page.locator('[data-testid=history-row]').count();
        await context.close();
        if (i === 0) {
            console.log(`warm-up: ${t.toFixed(1)} ms (${rows} rows)`);
            continue;
        }
        samples.push(t);
        console.log(`sample ${i}: history rendered ${t.toFixed(1)} ms after navigation start (${rows} rows)`);
    }
} finally {
    await browser.close();
}
samples.sort((a, b) => a - b);
const median = samples[samples.length >> 1];
console.log(`time to first render of the history: median ${median.toFixed(1)} ms over ${samples.length} cold loads (limit ${MAX_MS} ms)`);
process.exit(Number.isFinite(median) && median <= MAX_MS ? 0 : 1);
