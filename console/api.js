// Client of the evald REST API (/v1): evaluations, sessions, datasets, experiments, their
// reviews, and their judge's judgements, pairs and pair reviews. Owns the bearer token of this
// tab (sessionStorage) and turns RFC 9457 problem+json answers into ApiError. When a request
// gets 401 the token prompt set by the app is shown once and shared by every request waiting
// at that moment; then the request is retried once. Module state: the token and the pending
// prompt only.

const TOKEN_KEY = 'evald.token';

export class ApiError extends Error {
    constructor(status, problem) {
        const detail = (problem && (problem.detail || problem.title)) || `request failed with status ${status}`;
        super(detail);
        this.name = 'ApiError';
        this.status = status;
        this.code = (problem && problem.code) || null;
        this.detail = detail;
        this.problem = problem || null;
    }
}

let promptForToken = async () => null;
let pendingPrompt = null;

// fn: async (reason) => token string or null (the user declined).
export function setTokenPrompt(fn) {
    promptForToken = fn;
}

function storage() {
    try {
        return globalThis.sessionStorage || null;
    } catch {
        return null;
    }
}

export function getToken() {
    const s = storage();
    return (s && s.getItem(TOKEN_KEY)) || '';
}

export function setToken(token) {
    const s = storage();
    if (!s) return;
    if (token) s.setItem(TOKEN_KEY, token);
    else s.removeItem(TOKEN_KEY);
}

function askToken(reason) {
    if (!pendingPrompt) {
        pendingPrompt = Promise.resolve(promptForToken(reason)).then((t) => {
            pendingPrompt = null;
            if (t) setToken(t);
            return t || null;
        });
    }
    return pendingPrompt;
}

async function parseBody(res) {
    const type = res.headers.get('content-type') || '';
    const text = await res.text();
    if (!text) return null;
    if (type.includes('json')) {
        try {
            return JSON.parse(text);
        } catch {
            return { detail: 'the server sent malformed JSON' };
        }
    }
    return { detail: text.slice(0, 300) };
}

// Sends one request. body (optional) is serialised as JSON, or sent as it is (a string, Blob
// or File) with Content-Type rawType when rawType is given. Returns the decoded JSON answer;
// throws ApiError on any non-2xx answer (after one token prompt on 401) or on a network failure.
export async function request(method, path, body, rawType) {
    for (let attempt = 0; ; attempt++) {
        const headers = { Accept: 'application/json' };
        const token = getToken();
        if (token) headers.Authorization = `Bearer ${token}`;
        if (body !== undefined) headers['Content-Type'] = rawType || 'application/json';
        let res;
        try {
            res = await fetch(path, {
                method,
                headers,
                body: body === undefined ? undefined : rawType ? body : JSON.stringify(body),
                cache: 'no-store',
            });
        } catch (e) {
            throw new ApiError(0, { detail: `could not reach evald (${e.message})`, code: 'network' });
        }
        if (res.status === 401 && attempt === 0) {
            const fresh = await askToken(token ? 'the saved token was refused' : 'this evald requires an API token');
            if (fresh) continue;
        }
        const data = await parseBody(res);
        if (!res.ok) throw new ApiError(res.status, data);
        return data;
    }
}

export const api = {
    list: ({ limit = 50, before } = {}) => {
        const q = new URLSearchParams({ limit: String(limit) });
        if (before) q.set('before', before);
        return request('GET', `/v1/evaluations?${q}`);
    },
    get: (id) => request('GET', `/v1/evaluations/${encodeURIComponent(id)}`),
    status: (id) => request('GET', `/v1/evaluations/${encodeURIComponent(id)}/status`),
    start: (body) => request('POST', '/v1/evaluations', body),
    cancel: (id) => request('POST', `/v1/evaluations/${encodeURIComponent(id)}/cancel`, {}),
    rerun: (id, reverseOrder) =>
        request('POST', `/v1/evaluations/${encodeURIComponent(id)}/rerun`, { reverse_order: Boolean(reverseOrder) }),
    remove: (id) => request('DELETE', `/v1/evaluations/${encodeURIComponent(id)}`),
    models: () => request('GET', '/v1/models'),
    sessions: ({ limit = 50, before } = {}) => {
        const q = new URLSearchParams({ limit: String(limit) });
        if (before) q.set('before', before);
        return request('GET', `/v1/sessions?${q}`);
    },
    session: (id) => request('GET', `/v1/sessions/${encodeURIComponent(id)}`),
    createSession: (body) => request('POST', '/v1/sessions', body),
    compare: (ids, baseline) => request('GET', `/v1/sessions/compare?${compareQuery(ids, baseline)}`),
    datasets: ({ limit = 100, before } = {}) => request('GET', `/v1/datasets?${pageQuery(limit, before)}`),
    // file: a File or Blob; type: its Content-Type (text/csv, application/x-ndjson, application/json).
    uploadDataset: (file, name, type) => request('POST', `/v1/datasets?name=${encodeURIComponent(name)}`, file, type),
    experiments: ({ limit = 50, before } = {}) => request('GET', `/v1/experiments?${pageQuery(limit, before)}`),
    // source: 'evaluator' (the stored analysis) | 'human' | 'human_then_evaluator'.
    experiment: (id, source) => request('GET', `/v1/experiments/${encodeURIComponent(id)}${source && source !== 'evaluator' ? `?source=${encodeURIComponent(source)}` : ''}`),
    startExperiment: (body) => request('POST', '/v1/experiments', body),
    // What a start of `body` would run and cost; writes nothing.
    planExperiment: (body) => request('POST', '/v1/experiments/plan', body),
    cancelExperiment: (id) => request('POST', `/v1/experiments/${encodeURIComponent(id)}/cancel`, {}),
    removeExperiment: (id) => request('DELETE', `/v1/experiments/${encodeURIComponent(id)}`),
    // filter: '' | 'flaky' | 'disagree'.
    experimentCases: (id, { filter, limit = 100, before } = {}) => {
        const q = new URLSearchParams({ limit: String(limit) });
        if (filter) q.set('filter', filter);
        if (before) q.set('before', before);
        return request('GET', `/v1/experiments/${encodeURIComponent(id)}/cases?${q}`);
    },
    experimentRuns: (id, caseId, { limit = 100, before } = {}) => {
        const q = new URLSearchParams({ case_id: caseId, limit: String(limit) });
        if (before) q.set('before', before);
        return request('GET', `/v1/experiments/${encodeURIComponent(id)}/runs?${q}`);
    },
    // The next `limit` runs `reviewer` has not reviewed, most useful first, past the first
    // `offset` (the runs skipped: they stay in the queue).
    reviewQueue: (id, { reviewer, limit = 100, offset = 0 } = {}) => {
        const q = new URLSearchParams({ limit: String(limit) });
        if (reviewer) q.set('reviewer', reviewer);
        if (offset) q.set('offset', String(offset));
        return request('GET', `/v1/experiments/${encodeURIComponent(id)}/review-queue?${q}`);
    },
    // body: {verdict: 'pass'|'fail', note?, reviewer}.
    putReview: (id, runId, body) =>
        request('PUT', `/v1/experiments/${encodeURIComponent(id)}/runs/${encodeURIComponent(runId)}/review`, body),
    reviews: (id, { reviewer, limit = 100, before } = {}) => {
        const q = pageQuery(limit, before);
        if (reviewer) q.set('reviewer', reviewer);
        return request('GET', `/v1/experiments/${encodeURIComponent(id)}/reviews?${q}`);
    },
    agreement: (id) => request('GET', `/v1/experiments/${encodeURIComponent(id)}/agreement`),
    // One row per judge call, in case, repeat, treatment, order order; filters optional.
    judgements: (id, { caseId, treatment, limit = 100, before } = {}) => {
        const q = pageQuery(limit, before);
        if (caseId !== undefined) q.set('case_id', caseId);
        if (treatment !== undefined) q.set('treatment', String(treatment));
        return request('GET', `/v1/experiments/${encodeURIComponent(id)}/judgements?${q}`);
    },
    // p: {case_id, repeat, treatment}.
    pair: (id, p) => request('GET', pairPath(id, p)),
    // body: {winner: 'control'|'tie'|'treatment', reviewer, note?}.
    putPairReview: (id, p, body) => request('PUT', `${pairPath(id, p)}/review`, body),
    pairReviews: (id, { reviewer, limit = 100, before } = {}) => {
        const q = pageQuery(limit, before);
        if (reviewer) q.set('reviewer', reviewer);
        return request('GET', `/v1/experiments/${encodeURIComponent(id)}/pairs/reviews?${q}`);
    },
    judgeAgreement: (id) => request('GET', `/v1/experiments/${encodeURIComponent(id)}/judge/agreement`),
};

function pairPath(id, p) {
    return `/v1/experiments/${encodeURIComponent(id)}/pairs/${encodeURIComponent(p.case_id)}/${encodeURIComponent(p.repeat)}/${encodeURIComponent(p.treatment)}`;
}

function pageQuery(limit, before) {
    const q = new URLSearchParams({ limit: String(limit) });
    if (before) q.set('before', before);
    return q;
}

// Path of an experiment's export (format jsonl or csv; records runs, the default, or
// judgements: one record per judge call), without a token: a plain link works when the server
// needs none; with a token the view downloads it through exportBlob().
export function exportPath(id, format, records) {
    const base = `/v1/experiments/${encodeURIComponent(id)}/export?format=${encodeURIComponent(format)}`;
    return records && records !== 'runs' ? `${base}&records=${encodeURIComponent(records)}` : base;
}

// Downloads an export with the tab's token in the Authorization header; resolves a Blob.
export async function exportBlob(id, format, records) {
    const headers = {};
    const token = getToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    const res = await fetch(exportPath(id, format, records), { headers, cache: 'no-store' });
    if (!res.ok) throw new ApiError(res.status, await parseBody(res));
    return res.blob();
}

// URL of the Server-Sent Events stream of one experiment (token as access_token, as for
// eventsUrl()).
export function experimentEventsUrl(id) {
    const token = getToken();
    const base = `/v1/experiments/${encodeURIComponent(id)}/events`;
    return token ? `${base}?access_token=${encodeURIComponent(token)}` : base;
}

// ids=a,b,c&baseline=a (commas kept readable; each id encoded).
function compareQuery(ids, baseline) {
    const q = `ids=${ids.map(encodeURIComponent).join(',')}`;
    return baseline ? `${q}&baseline=${encodeURIComponent(baseline)}` : q;
}

// URL of the live comparison stream (SSE); the token travels as access_token, as for
// eventsUrl().
export function compareEventsUrl(ids, baseline) {
    const token = getToken();
    const base = `/v1/sessions/compare/events?${compareQuery(ids, baseline)}`;
    return token ? `${base}&access_token=${encodeURIComponent(token)}` : base;
}

// URL of the Server-Sent Events stream of one evaluation. EventSource cannot send headers, so
// the token travels as access_token on this route only.
export function eventsUrl(id) {
    const token = getToken();
    const base = `/v1/evaluations/${encodeURIComponent(id)}/events`;
    return token ? `${base}?access_token=${encodeURIComponent(token)}` : base;
}
