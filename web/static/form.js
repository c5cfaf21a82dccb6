// A form generated from a Type's JSON Schema. Validation is the server's:
// the form sends what the user typed and shows each cause the server
// returns (field "spec.a.b") at the field it names.
import { h, isSecretKey, schemaMarksSecret, maskWith } from './lib.js';

let seq = 0;

// schemaForm returns {el, value(), showErrors(causes) -> unplaced causes}.
// readOnly renders a preview of the schema with no value.
export function schemaForm(schema, value, { readOnly = false, idPrefix = 'f' } = {}) {
  const prefix = `${idPrefix}${++seq}`;
  const fields = new Map(); // dotted path -> {input, err}
  const root = build(schema || {}, value, [], true, 'value');
  const el = h('div', { class: 'schema-form' }, root.el);
  return {
    el,
    value: () => root.get(),
    showErrors(causes) {
      for (const f of fields.values()) { f.err.textContent = ''; f.input?.removeAttribute('aria-invalid'); }
      const unplaced = [];
      let first = null;
      for (const c of causes) {
        const path = (c.field || '').replace(/^spec\.?/, '').replace(/^value\.?/, '');
        const f = fields.get(path);
        if (!f || !c.field?.startsWith('spec')) { unplaced.push(c); continue; }
        f.err.textContent = f.err.textContent ? `${f.err.textContent}; ${c.message}` : c.message;
        f.input?.setAttribute('aria-invalid', 'true');
        first ??= f.input;
      }
      first?.focus();
      return unplaced;
    },
  };

  function register(path, input) {
    const err = h('p', { class: 'field-error', id: `${prefix}-${path.join('-') || 'root'}-err`, 'data-field': path.join('.') });
    if (input) input.setAttribute('aria-describedby', err.id);
    fields.set(path.join('.'), { input, err });
    return err;
  }

  function labelOf(s, name) { return s.title || name; }

  function build(s, v, path, required, name) {
    const id = `${prefix}-${path.join('-') || 'root'}`;
    const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type || (s.properties ? 'object' : undefined);
    const rules = constraints(s);
    const hintText = [s.description, rules].filter(Boolean).join(' · ');
    const hint = hintText ? h('span', { class: 'hint', id: `${id}-hint` }, hintText) : null;
    const req = required && path.length ? h('span', { class: 'req', 'aria-hidden': 'true' }, ' *') : null;
    if (type === 'object' && s.properties) {
      const req2 = new Set(s.required || []);
      const kids = Object.entries(s.properties).map(([k, ps]) => [k, build(ps, v?.[k], [...path, k], req2.has(k), k)]);
      const err = register(path, null);
      const box = path.length
        ? h('fieldset', {}, h('legend', {}, labelOf(s, name), req), hint, kids.map(([, c]) => c.el), err)
        : h('div', {}, hint, kids.map(([, c]) => c.el), err);
      const touched = () => kids.some(([, c]) => c.touched());
      return {
        el: box,
        touched,
        get() {
          // An optional object the value leaves out stays out until one of
          // its fields is changed (its required members would be sent as
          // empty strings, and its defaults lost).
          if (v === undefined && path.length && !required && !touched()) return undefined;
          // Members the schema does not name (additionalProperties) are
          // kept: the form has no field for them, and a save must not drop them.
          const out = {};
          if (v && typeof v === 'object' && !Array.isArray(v)) for (const [k, x] of Object.entries(v)) if (!(k in s.properties)) out[k] = x;
          for (const [k, c] of kids) { const x = c.get(); if (x !== undefined) out[k] = x; }
          return Object.keys(out).length || path.length === 0 || required ? out : undefined;
        },
      };
    }
    const common = { id, name: path.join('.'), disabled: readOnly, 'aria-required': required ? 'true' : null };
    let input, get;
    if (Array.isArray(s.enum)) {
      // Left unset, an optional enum is its default (a stack's configuration
      // set: the server applies it): the empty choice says which it is.
      input = h('select', common, required ? null : h('option', { value: '' }, s.default === undefined ? '—' : `— (default: ${s.default})`),
        s.enum.map((o) => h('option', { value: JSON.stringify(o), selected: JSON.stringify(o) === JSON.stringify(v) }, String(o))));
      get = () => (input.value === '' ? undefined : JSON.parse(input.value));
    } else if (type === 'boolean') {
      // Absent, it shows its default and stays absent unless changed (an
      // unticked box would write false over a default of true).
      input = h('input', { ...common, type: 'checkbox', checked: v === undefined ? s.default === true : v === true });
      const err = register(path, input);
      return kept({ el: h('div', { class: 'field check' }, input, h('label', { for: id }, labelOf(s, name), req), hint, err), get: () => input.checked }, input, v);
    } else if (type === 'integer' || type === 'number') {
      input = h('input', { ...common, type: 'text', inputmode: type === 'integer' ? 'numeric' : 'decimal', value: v ?? '' });
      // A number that does not parse is sent as text, so the server names it.
      get = () => { const t = input.value.trim(); if (t === '') return undefined; const n = Number(t); return Number.isFinite(n) ? n : t; };
    } else if (type === 'string') {
      const secret = schemaMarksSecret(schema, s) || s.format === 'password' || s.writeOnly || isSecretKey(name);
      input = h('input', { ...common, type: secret ? 'password' : 'text', value: v ?? '', autocomplete: 'off', spellcheck: 'false' });
      get = () => (input.value === '' && !required ? undefined : input.value);
      if (secret && !readOnly) {
        // Hidden until asked, like the instance page's values.
        const show = h('button', { type: 'button', class: 'ghost small', 'aria-controls': id, 'aria-pressed': 'false', 'data-reveal': path.join('.'), onclick: () => {
          const shown = input.type === 'text';
          input.type = shown ? 'password' : 'text';
          show.setAttribute('aria-pressed', String(!shown));
          show.textContent = shown ? `Show ${labelOf(s, name)}` : `Hide ${labelOf(s, name)}`;
        } }, `Show ${labelOf(s, name)}`);
        if (hint) input.setAttribute('aria-describedby', hint.id);
        const err = register(path, input);
        if (hint) input.setAttribute('aria-describedby', `${hint.id} ${err.id}`);
        return kept({ el: h('div', { class: 'field' }, h('label', { for: id }, labelOf(s, name), req, h('span', { class: 'muted' }, ' (string, secret)')), hint, h('div', { class: 'secret-input' }, input, show), err), get }, input, v);
      }
    } else {
      // arrays, untyped values and anything richer: edited as JSON.
      const masked = v === undefined ? v : maskWith(v, s, schema);
      const holdsSecrets = JSON.stringify(masked) !== JSON.stringify(v);
      input = h('textarea', { ...common, rows: 4, spellcheck: 'false', readonly: holdsSecrets && !readOnly }, v === undefined ? '' : JSON.stringify(masked, null, 2));
      let revealed = !holdsSecrets;
      // Unrevealed, the field keeps the value it had: what it shows is masked.
      get = () => { if (!revealed) return v; const t = input.value.trim(); if (t === '') return undefined; try { return JSON.parse(t); } catch { return t; } };
      if (holdsSecrets && !readOnly) {
        const show = h('button', { type: 'button', class: 'ghost small', 'aria-controls': id, 'data-reveal': path.join('.'), onclick: () => {
          revealed = true;
          input.value = JSON.stringify(v, null, 2);
          input.removeAttribute('readonly');
          show.remove();
          input.focus();
        } }, `Show and edit ${labelOf(s, name)} (holds secrets)`);
        if (hint) input.setAttribute('aria-describedby', hint.id);
        const err = register(path, input);
        if (hint) input.setAttribute('aria-describedby', `${hint.id} ${err.id}`);
        return kept({ el: h('div', { class: 'field' }, h('label', { for: id }, labelOf(s, name), req, type ? h('span', { class: 'muted' }, ` (${type})`) : null), hint, input, show, err), get }, input, v);
      }
    }
    if (hint) input.setAttribute('aria-describedby', hint.id);
    const err = register(path, input);
    if (hint) input.setAttribute('aria-describedby', `${hint.id} ${err.id}`);
    return kept({ el: h('div', { class: 'field' }, h('label', { for: id }, labelOf(s, name), req, type ? h('span', { class: 'muted' }, ` (${type})`) : null), hint, input, err), get }, input, v);
  }
}

// kept makes a field left alone give back the value it was given, exactly
// (a null, a number written as text, a boolean left out): a save changes
// only what the user changed. An absent value stays absent for a boolean
// (its box shows the default); other empty fields say what they hold.
function kept(field, input, v) {
  let touched = false;
  for (const ev of ['input', 'change']) input.addEventListener(ev, () => { touched = true; });
  return {
    el: field.el,
    touched: () => touched,
    get: () => (touched ? field.get() : v !== undefined ? v : input.type === 'checkbox' ? undefined : field.get()),
  };
}

// constraints says in words what the schema asks of a scalar, so the user
// knows before the server says.
function constraints(s) {
  const out = [];
  if (s.minimum !== undefined && s.maximum !== undefined) out.push(`${s.minimum} to ${s.maximum}`);
  else if (s.minimum !== undefined) out.push(`at least ${s.minimum}`);
  else if (s.maximum !== undefined) out.push(`at most ${s.maximum}`);
  if (s.minLength) out.push(`at least ${s.minLength} character${s.minLength === 1 ? '' : 's'}`);
  if (s.maxLength !== undefined) out.push(`at most ${s.maxLength} characters`);
  if (s.format) out.push(`format ${s.format}`);
  if (s.pattern) out.push(`matches ${s.pattern}`);
  if (s.default !== undefined && typeof s.default !== 'object') out.push(`default ${s.default}`);
  return out.join(', ');
}
