// The pairwise judge's parts of an experiment's detail (experiment.js), as elements: the
// banner of a judged treatment (the chosen verdict's headline, the evaluator's and the
// judge's verdicts side by side with the chosen one marked, the judge-quality figures and why
// not to trust the judge) and the card of the judged pairs, each leading to the pair view
// (pair.js). Stateless: the caller owns the data and re-renders. All text is inserted as
// text nodes.
import { armList } from './analysis.js';
import { h } from './dom.js';
import {
    distrustReasons, judgementText, outcomeText, pairHash, preferenceFigures, qualityFigures, verdictBy,
} from './judging.js';

// The banner of treatment comparison c with a judge; b: its verdictBanner(); sources:
// verdictSources(); exp: the experiment.
export function judgedBanner(c, b, sources, exp) {
    const an = exp.analysis || {};
    const by = verdictBy(c, an);
    const q = c.judge_quality || null;
    const reasons = distrustReasons(q);
    const alpha = Number.isFinite(an.alpha) ? an.alpha : 0.05;
    const level = `${(100 * (1 - alpha)).toFixed(1).replace(/\.0$/, '')}%`;
    const box = (s) => {
        const figures = s.source === 'judge' ? preferenceFigures(c.preference, an) : b.figures;
        return h('div', {
            class: ['vb-source', `vb-${s.verdict || 'none'}`, s.chosen && 'chosen'], 'data-testid': `exp-verdict-${s.source}`,
            'data-verdict': s.verdict || '', 'data-chosen': String(s.chosen),
        },
        h('p', { class: 'vb-source-head' },
            h('span', { class: 'vb-source-name' }, s.source === 'judge' ? 'Judge · preference' : 'Evaluator · pass rate'), ' ',
            h('span', { class: 'vb-word', 'data-testid': 'exp-verdict-source-word' }, s.verdict || 'none'),
            s.chosen ? h('span', { class: 'badge chosen', 'data-testid': 'exp-verdict-chosen', title: `analysis.verdict_by: ${by}` }, 'chosen') : null),
        s.verdict || s.source === 'judge'
            ? h('p', { class: 'vb-figures small', 'data-testid': `exp-verdict-${s.source}-figures` }, figures.join(' · '))
            : h('p', { class: 'muted small' }, 'no evaluator'));
    };
    return h('div', {
        class: `verdict-banner vb-${b.verdict}`, 'data-testid': 'exp-verdict', 'data-treatment': c.treatment,
        'data-verdict': b.verdict, 'data-partial': String(b.partial), 'data-verdict-by': by,
    },
    h('p', { class: 'vb-head' },
        h('span', { class: 'vb-word', 'data-testid': 'exp-verdict-word' }, b.verdict),
        ' ', h('span', { 'data-testid': 'exp-verdict-headline' }, b.headline),
        h('span', { class: 'muted small' }, ` · by the ${by}`),
        b.anytime ? h('span', { class: 'badge anytime', 'data-testid': 'exp-verdict-anytime' }, 'anytime-valid') : null,
        b.partial ? h('span', { class: 'badge partial' }, 'partial') : null),
    h('div', { class: 'vb-sources' }, sources.map(box)),
    b.fixed ? h('p', { class: 'vb-fixed small', 'data-testid': 'exp-verdict-fixed', 'data-verdict': c.fixed_verdict || '' }, b.fixed) : null,
    by === 'evaluator' && b.needs ? h('p', { class: 'vb-needs', 'data-testid': 'exp-verdict-needs' }, b.needs) : null,
    q ? h('dl', { class: 'vb-quality small', 'data-testid': 'exp-judge-quality', 'data-distrust': String(reasons.length > 0) },
        qualityFigures(q, level).map((f) => [h('dt', null, f.label), h('dd', { 'data-testid': `exp-judge-${f.key}` }, f.text)])) : null,
    reasons.length ? h('p', { class: 'vb-distrust', 'data-testid': 'exp-judge-distrust', role: 'note' },
        h('strong', null, 'Do not trust this judge\'s verdict: '),
        reasons.map((r, i) => [i ? '; ' : '', h('span', { 'data-testid': 'exp-judge-distrust-reason', 'data-code': r.code }, r.text)]), '.') : null);
}

// The children of the judged-pairs card: {id, exp, pairs (addJudgements()), loaded, error,
// more (another page), onMore}.
export function pairsCard({ id, exp, pairs, loaded, error, more, onMore }) {
    const arms = armList(exp);
    const control = (arms[0] && arms[0].label) || 'control';
    const labelOf = (t) => ((arms.find((a) => a.index === t) || {}).label) || `treatment ${t}`;
    let body;
    if (error) body = h('p', { class: 'error-text', 'data-testid': 'exp-pairs-error' }, error);
    else if (!loaded) body = h('p', { class: 'muted' }, 'Loading the judgements…');
    else if (!pairs.length) body = h('p', { class: 'muted', 'data-testid': 'exp-pairs-empty' }, 'No pair judged yet: a pair is judged once both of its runs have an output.');
    else {
        body = h('div', { class: 'table-wrap' }, h('table', { class: 'report pairs', 'data-testid': 'exp-pairs-table' },
            h('caption', null, 'One row per pair (case, repeat, treatment): what the judge answered in each order and the pair\'s outcome. Open a pair to read both outputs and review it.'),
            h('thead', null, h('tr', null, ['Case', 'Repeat', 'Treatment', 'Order 1', 'Order 2', 'Outcome', ''].map((t) => h('th', { scope: 'col' }, t)))),
            h('tbody', null, pairs.map((p) => {
                const lb = { control, treatment: labelOf(p.treatment) };
                const order = (o) => {
                    const j = p.judgements.find((x) => x.order === o);
                    return j ? judgementText(j, lb).answer : '—';
                };
                return h('tr', {
                    class: ['pair-row', p.inconsistent && 'is-inconsistent'], 'data-testid': 'exp-pair-row', 'data-case-id': p.case_id, 'data-repeat': p.repeat,
                    'data-treatment': p.treatment, 'data-outcome': p.outcome || '', 'data-inconsistent': String(p.inconsistent),
                },
                h('th', { scope: 'row' }, h('span', { class: 'case-id' }, p.case_id)),
                h('td', null, String(p.repeat)),
                h('td', null, lb.treatment),
                h('td', null, order(1)),
                h('td', null, order(2)),
                h('td', { class: `outcome o-${p.outcome || 'none'}` }, outcomeText(p.outcome, lb),
                    p.inconsistent ? h('span', { class: 'badge flaky', title: 'the two orders named different arms' }, 'inconsistent') : null),
                h('td', null, h('a', { href: pairHash(id, p), 'data-testid': 'exp-pair-link' }, 'Open')));
            }))));
    }
    return [
        h('div', { class: 'picker-head' }, h('h2', null, 'Judged pairs'),
            h('a', { class: 'button small', href: `#/experiments/${encodeURIComponent(id)}/pairs`, 'data-testid': 'exp-pairs-review' }, 'Review pairs')),
        body,
        more ? h('p', null, h('button', { type: 'button', 'data-testid': 'exp-pairs-more', onclick: onMore }, 'Load more pairs')) : null,
    ];
}
