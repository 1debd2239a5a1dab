// A small, safe markdown renderer for model output: the whole source is HTML-escaped first and
// only a fixed set of constructs is turned into tags (headings, paragraphs, lists, quotes, fenced
// and inline code, emphasis, strike, links to http(s)/mailto only). Raw HTML is never passed
// through. Pure function of its input; returns an HTML string to assign to innerHTML.
import { escapeHtml } from './dom.js';

const SAFE_URL = /^(https?:\/\/|mailto:)/i;

// Inline constructs of one escaped line. Code spans and links are cut out into placeholders
// first so emphasis markers inside them stay literal.
function inline(escaped) {
    const slots = [];
    const keep = (html) => `\u0000${slots.push(html) - 1}\u0000`;
    let s = escaped.replace(/`([^`]+)`/g, (_, code) => keep(`<code>${code}</code>`));
    s = s.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (whole, text, url) => {
        const raw = url.replace(/&amp;/g, '&');
        if (!SAFE_URL.test(raw)) return whole;
        return keep(`<a href="${url}" target="_blank" rel="noopener noreferrer">${text}</a>`);
    });
    s = s.replace(/(^|[\s(])(https?:\/\/[^\s<]+[^\s<.,;:!?)'"&])/g, (_, pre, url) =>
        pre + keep(`<a href="${url}" target="_blank" rel="noopener noreferrer">${url}</a>`));
    s = s.replace(/\*\*(?=\S)([^*]*?\S)\*\*/g, '<strong>$1</strong>');
    s = s.replace(/(^|[^\w])__(?=\S)(.*?\S)__(?!\w)/g, '$1<strong>$2</strong>');
    s = s.replace(/(^|[^*\w])\*(?=[^\s*])([^*]*?[^\s*])\*(?!\*)/g, '$1<em>$2</em>');
    s = s.replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/g, '$1<em>$2</em>');
    s = s.replace(/~~(?=\S)(.*?\S)~~/g, '<del>$1</del>');
    // eslint-disable-next-line no-control-regex
    return s.replace(/\u0000(\d+)\u0000/g, (_, i) => slots[Number(i)]);
}

// Renders markdown source to an HTML string in which every text byte has been escaped.
export function renderMarkdown(source) {
    // eslint-disable-next-line no-control-regex
    const lines = String(source ?? '').replace(/\r\n?/g, '\n').replace(/\u0000/g, '').split('\n');
    const out = [];
    let para = [];
    let list = null; // {tag, items:[]}
    let quote = [];

    const flushPara = () => {
        if (para.length) out.push(`<p>${para.map(inline).join('<br>')}</p>`);
        para = [];
    };
    const flushList = () => {
        if (list) out.push(`<${list.tag}>${list.items.map((i) => `<li>${inline(i)}</li>`).join('')}</${list.tag}>`);
        list = null;
    };
    const flushQuote = () => {
        if (quote.length) out.push(`<blockquote>${renderMarkdown(quote.join('\n'))}</blockquote>`);
        quote = [];
    };
    const flushAll = () => {
        flushPara();
        flushList();
        flushQuote();
    };

    for (let i = 0; i < lines.length; i++) {
        const line = lines[i];
        const fence = /^\s*(```+|~~~+)\s*([\w+-]*)\s*$/.exec(line);
        if (fence) {
            flushAll();
            const body = [];
            i++;
            while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
            const lang = fence[2] ? ` data-lang="${escapeHtml(fence[2])}"` : '';
            out.push(`<pre class="md-code"${lang}><code>${escapeHtml(body.join('\n'))}</code></pre>`);
            continue;
        }
        if (/^\s*>/.test(line)) {
            flushPara();
            flushList();
            quote.push(line.replace(/^\s*>\s?/, ''));
            continue;
        }
        flushQuote();
        if (!line.trim()) {
            flushPara();
            flushList();
            continue;
        }
        const esc = escapeHtml(line);
        const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(esc);
        if (heading) {
            flushAll();
            const level = Math.min(6, heading[1].length + 2);
            out.push(`<h${level} class="md-h">${inline(heading[2])}</h${level}>`);
            continue;
        }
        if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
            flushAll();
            out.push('<hr>');
            continue;
        }
        const bullet = /^\s*[-*+]\s+(.*)$/.exec(esc);
        const ordered = /^\s*\d{1,9}[.)]\s+(.*)$/.exec(esc);
        if (bullet || ordered) {
            flushPara();
            const tag = bullet ? 'ul' : 'ol';
            if (list && list.tag !== tag) flushList();
            if (!list) list = { tag, items: [] };
            list.items.push((bullet || ordered)[1]);
            continue;
        }
        if (list && /^\s{2,}\S/.test(line)) {
            list.items[list.items.length - 1] += ' ' + esc.trim();
            continue;
        }
        flushList();
        para.push(esc);
    }
    flushAll();
    return out.join('\n');
}
