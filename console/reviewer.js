// The reviewer's name, kept in the browser's storage for run review (review.js) and pair
// review (pair.js) alike, and the limits the server puts on a review's fields.
export const NOTE_MAX = 4000;
export const REVIEWER_MAX = 200;

const REVIEWER_KEY = 'evald.reviewer';

function storage() {
    try {
        return globalThis.localStorage || null;
    } catch {
        return null;
    }
}

export function storedReviewer() {
    const s = storage();
    return ((s && s.getItem(REVIEWER_KEY)) || '').trim();
}

export function storeReviewer(name) {
    const s = storage();
    if (s) s.setItem(REVIEWER_KEY, name);
}
