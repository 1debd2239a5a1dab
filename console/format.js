// Number, time and identifier formatting shared by every view. Pure functions, no DOM, no state;
// every formatter returns an em dash for an absent value so tables never show "undefined".

export const DASH = '—';

function absent(v) {
    return v === undefined || v === null || (typeof v === 'number' && !Number.isFinite(v));
}

export function fmtInt(v) {
    if (absent(v)) return DASH;
    return Math.round(v).toLocaleString('en-US');
}

export function fmtNumber(v, digits = 2) {
    if (absent(v)) return DASH;
    if (Number.isInteger(v)) return v.toLocaleString('en-US');
    return v.toLocaleString('en-US', { maximumFractionDigits: digits });
}

export function fmtMs(v) {
    if (absent(v)) return DASH;
    const a = Math.abs(v);
    const sign = v < 0 ? '-' : '';
    if (a < 1000) return `${sign}${Math.round(a)} ms`;
    if (a < 60000) return `${sign}${(a / 1000).toFixed(a < 10000 ? 2 : 1)} s`;
    const m = Math.floor(a / 60000);
    const s = Math.floor((a % 60000) / 1000);
    return `${sign}${m}m ${String(s).padStart(2, '0')}s`;
}

export function fmtUsd(v) {
    if (absent(v)) return DASH;
    const a = Math.abs(v);
    const sign = v < 0 ? '-' : '';
    if (a === 0) return '$0';
    if (a < 0.01) return `${sign}$${a.toPrecision(3).replace(/\.?0+$/, '')}`;
    return `${sign}$${a.toFixed(a < 10 ? 4 : 2)}`;
}

export function fmtPct(rate) {
    if (absent(rate)) return DASH;
    return `${(rate * 100).toFixed(1).replace(/\.0$/, '')}%`;
}

export function fmtScore(v) {
    if (absent(v)) return DASH;
    return v.toFixed(3).replace(/0+$/, '').replace(/\.$/, '');
}

// Formats a signed difference with the unit of its kind: pct (percentage points), ms, usd,
// score, or a plain count.
export function fmtDelta(v, kind) {
    if (absent(v)) return DASH;
    if (v === 0) return kind === 'pct' ? '0 pp' : '0';
    const sign = v > 0 ? '+' : '−';
    const a = Math.abs(v);
    switch (kind) {
    case 'pct':
        return `${sign}${(a * 100).toFixed(1).replace(/\.0$/, '')} pp`;
    case 'ms':
        return sign + fmtMs(a);
    case 'usd':
        return sign + fmtUsd(a);
    case 'score':
        return sign + fmtScore(a);
    default:
        return sign + fmtNumber(a, 1);
    }
}

export function fmtValue(v, kind) {
    switch (kind) {
    case 'pct':
        return fmtPct(v);
    case 'ms':
        return fmtMs(v);
    case 'usd':
        return fmtUsd(v);
    case 'score':
        return fmtScore(v);
    default:
        return fmtNumber(v, 1);
    }
}

// Local date and time, "2025-03-01 14:05".
export function fmtDate(ms) {
    if (absent(ms) || ms <= 0) return DASH;
    const d = new Date(ms);
    const p = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}

// "3 min ago" style, relative to now (ms epoch).
export function fmtAgo(ms, now = Date.now()) {
    if (absent(ms) || ms <= 0) return DASH;
    const s = Math.max(0, Math.round((now - ms) / 1000));
    if (s < 45) return 'just now';
    if (s < 3600) return `${Math.round(s / 60)} min ago`;
    if (s < 86400) return `${Math.round(s / 3600)} h ago`;
    if (s < 86400 * 14) return `${Math.round(s / 86400)} d ago`;
    return fmtDate(ms).slice(0, 10);
}

// The 8 hex digits after "eval_", enough to tell evaluations apart in a list.
export function shortId(id) {
    if (typeof id !== 'string') return '';
    return id.startsWith('eval_') ? id.slice(5, 13) : id.slice(0, 8);
}

// A run's OpenTelemetry trace id (32 lowercase hex digits, `trace_id` of its run document),
// or null when it has none (not started yet) or the value is not one.
export function traceIdOf(run) {
    const v = run && run.trace_id;
    return typeof v === 'string' && /^[0-9a-f]{32}$/.test(v) ? v : null;
}

export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

export function isTerminal(status) {
    return TERMINAL.has(status);
}
