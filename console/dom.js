// DOM building helpers for the console. h() and svg() create elements from a props object and
// children; strings always become text nodes, so nothing passed here is ever parsed as HTML.
// copyButton() is a button that copies a text to the clipboard and says so.
// Stateless; safe to import from any module (never touches the document at import time).

const SVG_NS = 'http://www.w3.org/2000/svg';

function apply(el, props) {
    if (!props) return;
    for (const [key, value] of Object.entries(props)) {
        if (value === undefined || value === null || value === false) continue;
        if (key === 'class') {
            el.setAttribute('class', Array.isArray(value) ? value.filter(Boolean).join(' ') : value);
        } else if (key === 'text') {
            el.textContent = String(value);
        } else if (key.startsWith('on') && typeof value === 'function') {
            el.addEventListener(key.slice(2).toLowerCase(), value);
        } else if (key === 'value' && 'value' in el && !(el instanceof SVGElement)) {
            el.value = value;
        } else if (key === 'checked' || key === 'selected' || key === 'open' || key === 'disabled') {
            el[key] = Boolean(value);
            if (key !== 'checked' && key !== 'selected') el.setAttribute(key, '');
        } else {
            el.setAttribute(key, value === true ? '' : String(value));
        }
    }
}

function append(el, children) {
    for (const child of children) {
        if (child === undefined || child === null || child === false) continue;
        if (Array.isArray(child)) {
            append(el, child);
        } else if (typeof child === 'object' && 'nodeType' in child) {
            el.appendChild(child);
        } else {
            el.appendChild(document.createTextNode(String(child)));
        }
    }
}

// Returns a new HTML element <tag> with props (attributes, class, text, on<event>) and children.
export function h(tag, props, ...children) {
    const el = document.createElement(tag);
    apply(el, props);
    append(el, children);
    return el;
}

// Returns a new SVG element in the SVG namespace.
export function svg(tag, props, ...children) {
    const el = document.createElementNS(SVG_NS, tag);
    apply(el, props);
    append(el, children);
    return el;
}

// Replaces every child of el with children.
export function replace(el, ...children) {
    el.replaceChildren();
    append(el, children);
    return el;
}

// Returns a small button that copies `text` to the clipboard. Its label reads "Copied" for
// 2 s afterwards and done(true) is called (the caller's toast); when the clipboard refuses
// or is absent (a page served over plain http to another host), the text of `target` (an
// element) is selected so that Ctrl+C copies it, and done(false, error) is called.
export function copyButton(text, { label = 'Copy', ariaLabel, testid, target, done } = {}) {
    let timer = 0;
    const btn = h('button', { type: 'button', class: 'small ghost copy', 'aria-label': ariaLabel || null, 'data-testid': testid || null }, label);
    const settle = (ok, err) => {
        if (ok) {
            btn.textContent = 'Copied';
            btn.classList.add('copied');
            clearTimeout(timer);
            timer = setTimeout(() => {
                btn.textContent = label;
                btn.classList.remove('copied');
            }, 2000);
        } else if (target) {
            const range = document.createRange();
            range.selectNodeContents(target);
            const sel = window.getSelection();
            sel.removeAllRanges();
            sel.addRange(range);
        }
        if (done) done(ok, err);
    };
    btn.addEventListener('click', () => {
        if (!navigator.clipboard || !navigator.clipboard.writeText) {
            settle(false, new Error('the clipboard is not available here'));
            return;
        }
        navigator.clipboard.writeText(text).then(() => settle(true), (e) => settle(false, e));
    });
    return btn;
}

// Escapes text for inclusion in HTML source (markdown renderer only).
export function escapeHtml(text) {
    return String(text)
        .replace(/&/g, '&amp;')
        .replace(/</g, '&lt;')
        .replace(/>/g, '&gt;')
        .replace(/"/g, '&quot;')
        .replace(/'/g, '&#39;');
}
