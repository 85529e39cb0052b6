// The msgqueue console page. Every piece of data (queue names, payloads, error messages) reaches the page through
// textContent or a text node: nothing is ever parsed as HTML, and the Content-Security-Policy forbids it anyway
// (Trusted Types with no policy, no inline script).
'use strict';

(() => {
  const main = document.getElementById('main');
  const mode = document.getElementById('mode');
  let session = null;
  let renderSequence = 0;

  // ---- DOM helpers: elements and text nodes only.

  function el(tag, attributes, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      if (value === null || value === undefined || value === false) {
        continue;
      }
      if (name === 'class') {
        element.className = value;
      } else if (name.startsWith('on')) {
        element.addEventListener(name.slice(2), value);
      } else if (name === 'checked' || name === 'disabled') {
        element[name] = Boolean(value);
      } else {
        element.setAttribute(name, String(value));
      }
    }
    append(element, children);
    return element;
  }

  function append(parent, children) {
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) {
        continue;
      }
      parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return parent;
  }

  function link(hash, text, attributes) {
    return el('a', Object.assign({ href: hash }, attributes || {}), text);
  }

  function hash(view, params) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params || {})) {
      if (value !== null && value !== undefined && value !== '') {
        query.set(name, String(value));
      }
    }
    const text = query.toString();
    return '#/' + view + (text ? '?' + text : '');
  }

  // ---- formatting

  const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  const decimal = new Intl.NumberFormat('en-US', { maximumFractionDigits: 1 });

  function count(value, estimated) {
    if (value === null || value === undefined) {
      return '\u2014';
    }
    return (estimated && value > 0 ? '\u2248' : '') + integer.format(value);
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) {
      return '\u2014';
    }
    const s = Math.abs(seconds);
    if (s < 1) {
      return s === 0 ? '0 s' : decimal.format(s * 1000) + ' ms';
    }
    if (s < 60) {
      return decimal.format(s) + ' s';
    }
    if (s < 3600) {
      return Math.floor(s / 60) + ' min' + (Math.floor(s % 60) > 0 ? ' ' + Math.floor(s % 60) + ' s' : '');
    }
    if (s < 86400) {
      const minutes = Math.floor((s % 3600) / 60);
      return Math.floor(s / 3600) + ' h' + (minutes > 0 ? ' ' + minutes + ' min' : '');
    }
    const hours = Math.floor((s % 86400) / 3600);
    return Math.floor(s / 86400) + ' d' + (hours > 0 ? ' ' + hours + ' h' : '');
  }

  function timestamp(iso) {
    if (!iso) {
      return '\u2014';
    }
    return iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace('Z', ' UTC');
  }

  function ago(iso, now) {
    if (!iso) {
      return '';
    }
    const seconds = ((now ? Date.parse(now) : Date.now()) - Date.parse(iso)) / 1000;
    return seconds >= 0 ? duration(seconds) + ' ago' : 'in ' + duration(-seconds);
  }

  function when(iso, now) {
    if (!iso) {
      return '\u2014';
    }
    return el('span', { title: timestamp(iso) }, ago(iso, now));
  }

  function chars(n) {
    if (n < 1024) {
      return integer.format(n) + ' chars';
    }
    return decimal.format(n / 1024) + ' Ki chars';
  }

  // ---- the API

  async function api(path, params) {
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(params || {})) {
      if (value !== null && value !== undefined && value !== '') {
        query.set(name, String(value));
      }
    }
    const text = query.toString();
    const response = await fetch('api/' + path + (text ? '?' + text : ''), {
      headers: { Accept: 'application/json' },
      credentials: 'same-origin',
      cache: 'no-store',
    });
    return decode(response);
  }

  async function post(path, body) {
    const headers = Object.assign({ 'Content-Type': 'application/json', Accept: 'application/json' },
      session.postHeaders);
    const response = await fetch('api/' + path, {
      method: 'POST',
      headers,
      body: JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
    return decode(response);
  }

  async function decode(response) {
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const message = body && typeof body.error === 'string' ? body.error : 'HTTP ' + response.status;
      throw new Error(message);
    }
    return body;
  }

  // ---- routing: #/view?params

  function route() {
    const text = location.hash.startsWith('#/') ? location.hash.slice(2) : 'queues';
    const question = text.indexOf('?');
    const view = question < 0 ? text : text.slice(0, question);
    const params = Object.fromEntries(new URLSearchParams(question < 0 ? '' : text.slice(question + 1)));
    return { view: view || 'queues', params };
  }

  const views = {
    queues: renderQueues,
    queue: renderQueue,
    message: renderMessage,
    'dead-letters': renderDeadLetters,
    housekeeping: renderHousekeeping,
    throughput: renderThroughput,
  };

  const sections = { queue: 'queues', message: 'queues' };

  async function render() {
    const sequence = ++renderSequence;
    const { view, params } = route();
    const renderer = views[view] || renderQueues;
    const section = sections[view] || (views[view] ? view : 'queues');
    for (const a of document.querySelectorAll('nav a')) {
      a.classList.toggle('current', a.dataset.view === section);
    }
    try {
      const content = await renderer(params);
      if (sequence === renderSequence) {
        main.replaceChildren(content);
        main.dataset.view = view;
        main.dataset.rendered = location.hash;
      }
    } catch (e) {
      if (sequence === renderSequence) {
        main.replaceChildren(el('div', { class: 'error', role: 'alert' }, 'Could not load this view: ', e.message));
        main.dataset.view = 'error';
        main.dataset.rendered = location.hash;
      }
    }
  }

  function status(container, kind, ...text) {
    container.replaceChildren(el('p', { class: kind, role: 'status' }, ...text));
  }

  // ---- queues

  const queueColumns = [
    { id: 'name', label: 'Queue', sortable: true },
    { id: 'kind', label: 'Kind' },
    { id: 'depth', label: 'Depth', sortable: true, numeric: true },
    { id: 'ready', label: 'Ready', sortable: true, numeric: true },
    { id: 'delayed', label: 'Delayed', sortable: true, numeric: true },
    { id: 'inFlight', label: 'In flight', sortable: true, numeric: true },
    { id: 'oldest', label: 'Oldest ready', sortable: true, numeric: true },
    { id: 'lastActive', label: 'Last active', sortable: true },
    { id: 'reap', label: 'Reaped' },
  ];

  function statisticsNote(statistics) {
    if (!statistics) {
      return el('p', { class: 'note warn' }, 'No queue counts yet: the statistics have not been read. ',
        'Names, kinds and activity below are current.');
    }
    const source = statistics.source === 'housekeeper'
      ? 'as this service\u2019s housekeeper read them at its last tick'
      : 'as this console read them';
    const how = statistics.sampled
      ? 'estimated from a sample of the message table (it holds more than 50,000 messages): \u2248 marks an estimate'
      : 'exact';
    return el('p', { class: 'note' }, 'Counts ', how, ', ', source, ', ', duration(statistics.ageSeconds),
      ' ago (', timestamp(statistics.readAt), ') for ', integer.format(statistics.queues), ' queues.');
  }

  function reapText(queue, now) {
    const reap = queue.reap;
    if (!reap) {
      return '\u2014';
    }
    switch (reap.state) {
      case 'never':
        return 'never';
      case 'idle-after':
        return el('span', { title: 'if still idle and empty at ' + timestamp(reap.at) }, 'if idle, ', ago(reap.at, now));
      case 'kept':
        return el('span', { title: 'idle since ' + timestamp(queue.lastActive) + ', but it holds live messages' },
          'kept: holds messages');
      case 'due':
        return el('span', { class: 'due', title: 'idle past the threshold since ' + timestamp(reap.at) },
          'at the next tick');
      default:
        return reap.state;
    }
  }

  async function renderQueues(params) {
    const sort = params.sort || 'name';
    const dir = params.dir || (sort === 'name' ? 'asc' : 'desc');
    const data = await api('queues', { sort, dir, page: params.page, from: params.from });
    const sampled = data.statistics && data.statistics.sampled;
    const now = new Date().toISOString();

    const header = el('tr', {}, queueColumns.map((column) => {
      if (!column.sortable) {
        return el('th', { class: column.numeric ? 'num' : null }, column.label);
      }
      const current = column.id === sort;
      const nextDir = current ? (dir === 'asc' ? 'desc' : 'asc') : (column.id === 'name' ? 'asc' : 'desc');
      return el('th', { class: (column.numeric ? 'num ' : '') + (current ? 'sorted' : ''),
        'aria-sort': current ? (dir === 'asc' ? 'ascending' : 'descending') : null },
      link(hash('queues', { sort: column.id, dir: nextDir }), column.label, { 'data-sort': column.id }),
      current ? (dir === 'asc' ? ' \u25b2' : ' \u25bc') : '');
    }));

    const rows = data.rows.map((queue) => {
      const counts = queue.counts;
      return el('tr', { 'data-queue': queue.name, class: queue.exists ? null : 'gone' },
        el('td', { class: 'name' }, queue.exists ? link(hash('queue', { name: queue.name }), queue.name) : queue.name),
        el('td', {}, queue.exists ? queue.kind : 'gone since the counts were read'),
        el('td', { class: 'num depth' }, counts ? count(counts.depth, sampled) : '\u2014'),
        el('td', { class: 'num' }, counts ? count(counts.ready, sampled) : '\u2014'),
        el('td', { class: 'num' }, counts ? count(counts.delayed, sampled) : '\u2014'),
        el('td', { class: 'num' }, counts ? count(counts.inFlight, sampled) : '\u2014'),
        el('td', { class: 'num' }, counts && counts.ready > 0 ? duration(counts.oldestReadyAgeSeconds) : '\u2014'),
        el('td', {}, queue.exists ? when(queue.lastActive, now) : '\u2014'),
        el('td', {}, queue.exists ? reapText(queue, now) : '\u2014'));
    });

    const jump = el('input', { id: 'jump', placeholder: 'queue name', value: params.from || '',
      'aria-label': 'jump to queue name', spellcheck: 'false' });
    const jumpForm = el('form', { class: 'inline', onsubmit: (event) => {
      event.preventDefault();
      location.hash = hash('queues', { sort: 'name', dir, from: jump.value });
    } }, el('label', { for: 'jump' }, 'Jump to name '), jump, ' ', el('button', { type: 'submit' }, 'Go'));

    const total = data.statistics ? data.statistics.queues : null;
    let position = '';
    if (data.rows.length > 0 && sort !== 'name') {
      position = 'rows ' + integer.format(data.offset + 1) + '\u2013' + integer.format(data.offset + data.rows.length)
        + (sort !== 'lastActive' && total !== null ? ' of ' + integer.format(total) : '');
    }
    const pager = el('div', { class: 'pager' },
      link(hash('queues', { sort, dir }), '\u00ab First', { id: 'first-page' }), ' ',
      data.previous ? link(hash('queues', { sort, dir, page: data.previous }), '\u2039 Previous', { id: 'previous-page' })
        : el('span', { class: 'disabled' }, '\u2039 Previous'), ' ',
      data.next ? link(hash('queues', { sort, dir, page: data.next }), 'Next \u203a', { id: 'next-page', rel: 'next' })
        : el('span', { class: 'disabled' }, 'Next \u203a'), ' ',
      el('span', { class: 'muted', id: 'position' }, position));

    return el('section', {},
      el('h1', {}, 'Queues'),
      statisticsNote(data.statistics),
      el('div', { class: 'toolbar' }, sort === 'name' ? jumpForm : null, pager),
      data.rows.length === 0 ? el('p', { class: 'muted' }, 'No queues here.') : null,
      el('table', { class: 'grid', id: 'queues' }, el('thead', {}, header), el('tbody', {}, rows)),
      el('div', { class: 'toolbar' }, pager.cloneNode(true)),
      sort === 'lastActive' ? el('p', { class: 'note' }, 'By last activity the console reads the queue table and keeps ',
        'the top rows: it pages down to row ', integer.format(data.lastActiveMaxOffset), '.') : null);
  }

  // ---- one queue

  function countsCards(counts, estimated, exactNote) {
    const cards = [
      ['Depth', counts && count(counts.depth, estimated)],
      ['Ready', counts && count(counts.ready, estimated)],
      ['Delayed', counts && count(counts.delayed, estimated)],
      ['In flight', counts && count(counts.inFlight, estimated)],
      ['Expired', counts && count(counts.expired, estimated)],
      ['Oldest ready', counts && counts.ready > 0 ? duration(counts.oldestReadyAgeSeconds) : '\u2014'],
    ];
    return el('div', {},
      el('dl', { class: 'cards' }, cards.map(([label, value]) => el('div', { class: 'card' },
        el('dt', {}, label), el('dd', { 'data-count': label.toLowerCase() }, value || '\u2014')))),
      el('p', { class: 'note' }, exactNote));
  }

  function messagesTable(messages, now) {
    return el('table', { class: 'grid', id: 'messages' },
      el('thead', {}, el('tr', {}, el('th', { class: 'num' }, 'Id'), el('th', {}, 'State'),
        el('th', {}, 'Readable'), el('th', {}, 'Expires'), el('th', { class: 'num' }, 'Size'),
        el('th', {}, 'Payload'))),
      el('tbody', {}, messages.map((m) => el('tr', { 'data-id': m.id },
        el('td', { class: 'num' }, link(hash('message', { id: m.id }), String(m.id))),
        el('td', {}, m.state, m.failedDeliveries ? el('span', { class: 'muted' }, ' (' + m.failedDeliveries
          + ' failed)') : null),
        el('td', {}, when(m.readAfter, now)),
        el('td', {}, when(m.expiresAt, now)),
        el('td', { class: 'num' }, chars(m.payloadChars)),
        el('td', { class: 'payload-preview' }, el('code', {}, m.payloadPreview),
          m.payloadChars > m.payloadPreview.length ? el('span', { class: 'muted' }, ' \u2026') : null)))));
  }

  async function renderQueue(params) {
    const data = params.after
      ? await Promise.all([api('queue', { name: params.name }), api('messages', { queue: params.name,
        after: params.after })]).then(([queue, page]) => Object.assign(queue, { messages: page.messages,
        next: page.next, after: page.after }))
      : await api('queue', { name: params.name });
    const queue = data.queue;
    const now = new Date().toISOString();
    const estimated = !data.countsExact && data.statistics && data.statistics.sampled;
    const exactNote = data.countsExact
      ? 'Exact counts, read now (the queue holds at most ' + integer.format(data.exactUpTo) + ' messages).'
      : queue.counts ? 'From the statistics of every queue, ' + duration(data.statistics.ageSeconds) + ' old'
        + (data.statistics.sampled ? ', estimated from a sample.' : '.')
        : 'No counts: the queue holds more than ' + integer.format(data.exactUpTo)
          + ' messages and the statistics of every queue have not been read yet.';
    return el('section', {},
      el('p', { class: 'crumbs' }, link('#/queues', 'Queues'), ' \u203a'),
      el('h1', {}, 'Queue ', el('span', { class: 'queue-name', id: 'queue-name' }, queue.name)),
      el('dl', { class: 'facts' },
        el('dt', {}, 'Kind'), el('dd', {}, queue.kind),
        el('dt', {}, 'Last active'), el('dd', {}, when(queue.lastActive, now), ' (', timestamp(queue.lastActive), ')'),
        el('dt', {}, 'Reaped'), el('dd', {}, reapText(queue, now))),
      countsCards(queue.counts, estimated, exactNote),
      el('h2', {}, 'Messages', data.after > 0 ? ' after id ' + data.after : ', oldest first'),
      data.messages.length === 0 ? el('p', { class: 'muted' }, 'No messages.') : messagesTable(data.messages, now),
      el('div', { class: 'pager' },
        link(hash('queue', { name: queue.name }), '\u00ab First'), ' ',
        data.next ? link(hash('queue', { name: queue.name, after: data.next }), 'Next \u203a', { id: 'next-messages' })
          : el('span', { class: 'disabled' }, 'Next \u203a')));
  }

  // ---- one message

  async function renderMessage(params) {
    const m = await api('message', { id: params.id });
    const now = new Date().toISOString();
    const result = el('div', { id: 'action-result' });
    const failure = m.failure;
    const republish = m.deadLetter && session.actionsEnabled
      ? el('button', { id: 'republish-one', onclick: async (event) => {
        event.target.disabled = true;
        await republishIds([m.id], result);
      } }, 'Republish to ', failure.originalQueue) : null;
    return el('section', {},
      el('p', { class: 'crumbs' }, link('#/queues', 'Queues'), ' \u203a ',
        link(hash('queue', { name: m.queue }), m.queue), ' \u203a'),
      el('h1', {}, 'Message ', String(m.id)),
      el('dl', { class: 'facts' },
        el('dt', {}, 'Queue'), el('dd', {}, m.queue),
        el('dt', {}, 'State'), el('dd', {}, m.state, ' (', m.status, ')'),
        el('dt', {}, 'Readable'), el('dd', {}, timestamp(m.readAfter), ' (', ago(m.readAfter, now), ')'),
        el('dt', {}, 'Expires'), el('dd', {}, timestamp(m.expiresAt), ' (', ago(m.expiresAt, now), ')'),
        el('dt', {}, 'Size'), el('dd', {}, chars(m.payloadChars))),
      failure ? el('div', { class: 'failure' },
        el('h2', {}, m.deadLetter ? 'Dead letter' : 'Failed deliveries'),
        el('dl', { class: 'facts' },
          el('dt', {}, 'Failed deliveries'), el('dd', {}, String(failure.failedDeliveries)),
          el('dt', {}, 'Last error'), el('dd', {}, failure.lastErrorClass || '\u2014'),
          el('dt', {}, 'Last failed'), el('dd', {}, timestamp(failure.lastFailedAt)),
          m.deadLetter ? [el('dt', {}, 'From queue'), el('dd', {}, failure.originalQueue),
            el('dt', {}, 'Dead-lettered'), el('dd', {}, timestamp(failure.deadLetteredAt))] : null),
        failure.lastErrorMessage ? el('pre', { class: 'error-message', id: 'error-message' },
          failure.lastErrorMessage) : null) : null,
      republish, result,
      el('h2', {}, 'Payload'),
      el('pre', { class: 'payload', id: 'payload' }, m.payload));
  }

  // ---- dead letters

  async function republishIds(ids, result) {
    status(result, 'muted', 'Republishing ', String(ids.length), ' dead letter(s)\u2026');
    try {
      const answer = await post('dead-letters/republish', { ids });
      const parts = Object.entries(answer.summary).map(([outcome, n]) => n + ' ' + outcome.toLowerCase()
        .replaceAll('_', ' '));
      status(result, answer.summary.REPUBLISHED === ids.length ? 'ok' : 'warn', parts.join(', '), '.');
      return answer;
    } catch (e) {
      status(result, 'error', 'Republish failed: ', e.message);
      return null;
    }
  }

  function openPurgeDialog(queue, ids, result, done) {
    const dialog = document.getElementById('purge-dialog');
    const form = document.getElementById('purge-form');
    const input = document.getElementById('purge-confirm');
    const submit = document.getElementById('purge-submit');
    const cancel = document.getElementById('purge-cancel');
    document.getElementById('purge-what').replaceChildren(ids
      ? 'The ' + ids.length + ' selected dead letter(s) of '
      : 'Every dead letter in ', el('strong', {}, queue), ids ? '.' : ' that no consumer holds right now.');
    input.value = '';
    submit.disabled = true;
    const onInput = () => {
      submit.disabled = input.value !== queue;
    };
    const close = () => {
      input.removeEventListener('input', onInput);
      form.removeEventListener('submit', onSubmit);
      cancel.removeEventListener('click', close);
      dialog.close();
    };
    const onSubmit = async (event) => {
      event.preventDefault();
      if (input.value !== queue) {
        return;
      }
      close();
      status(result, 'muted', 'Purging\u2026');
      try {
        const body = { queue, confirm: input.value };
        if (ids) {
          body.ids = ids;
        }
        const answer = await post('dead-letters/purge', body);
        status(result, 'ok', 'Purged ', integer.format(answer.purged), ' dead letter(s) of ', queue, '; ',
          answer.leftCapped ? 'more than ' : '', integer.format(answer.left), ' left.');
        done();
      } catch (e) {
        status(result, 'error', 'Purge failed: ', e.message);
      }
    };
    input.addEventListener('input', onInput);
    form.addEventListener('submit', onSubmit);
    cancel.addEventListener('click', close);
    dialog.showModal();
    input.focus();
  }

  async function renderDeadLetters(params) {
    const data = await api('dead-letters', { queue: params.queue, after: params.after });
    const now = new Date().toISOString();
    const result = el('div', { id: 'action-result' });
    const actions = session.actionsEnabled;
    const selected = new Set();
    const republishSelected = el('button', { id: 'republish-selected', disabled: true, onclick: async () => {
      const ids = [...selected];
      republishSelected.disabled = true;
      const answer = await republishIds(ids, result);
      if (answer) {
        markDone(answer.results);
      }
    } }, 'Republish selected');
    const purge = el('button', { id: 'purge', class: 'danger', disabled: !params.queue, title: params.queue
      ? null : 'filter by one dead-letter queue first', onclick: () => openPurgeDialog(params.queue,
      selected.size > 0 ? [...selected] : null, result, () => window.setTimeout(render, 1500)) }, 'Purge\u2026');

    function updateButtons() {
      republishSelected.disabled = selected.size === 0;
      republishSelected.textContent = selected.size > 0 ? 'Republish selected (' + selected.size + ')'
        : 'Republish selected';
      purge.textContent = selected.size > 0 ? 'Purge selected (' + selected.size + ')\u2026' : 'Purge all\u2026';
    }

    function markDone(results) {
      for (const r of results) {
        const row = main.querySelector('tr[data-id="' + Number(r.id) + '"]');
        if (row) {
          row.classList.add(r.outcome === 'REPUBLISHED' ? 'done' : 'failed');
          row.querySelector('td.outcome').textContent = r.outcome.toLowerCase().replaceAll('_', ' ');
          const box = row.querySelector('input[type=checkbox]');
          if (box && r.outcome === 'REPUBLISHED') {
            box.checked = false;
            box.disabled = true;
            selected.delete(r.id);
          }
          const button = row.querySelector('button');
          if (button && r.outcome === 'REPUBLISHED') {
            button.disabled = true;
          }
        }
      }
      updateButtons();
    }

    const selectAll = el('input', { type: 'checkbox', 'aria-label': 'select every dead letter on this page',
      onchange: () => {
        for (const box of main.querySelectorAll('tbody input[type=checkbox]:not(:disabled)')) {
          box.checked = selectAll.checked;
          box.dispatchEvent(new Event('change'));
        }
      } });

    const rows = data.rows.map((d) => el('tr', { 'data-id': d.id },
      actions ? el('td', {}, el('input', { type: 'checkbox', 'aria-label': 'select dead letter ' + d.id,
        onchange: (event) => {
          if (event.target.checked) {
            selected.add(d.id);
          } else {
            selected.delete(d.id);
          }
          updateButtons();
        } })) : null,
      el('td', { class: 'num' }, link(hash('message', { id: d.id }), String(d.id))),
      el('td', {}, link(hash('dead-letters', { queue: d.queue }), d.queue, { title: 'only this dead-letter queue' })),
      el('td', {}, d.originalQueue),
      el('td', { class: 'num' }, String(d.deliveries)),
      el('td', { class: 'error-preview' }, d.errorClass || '\u2014', d.errorPreview ? ': ' : '', d.errorPreview || ''),
      el('td', {}, when(d.deadLetteredAt, now)),
      el('td', { class: 'payload-preview' }, el('code', {}, d.payloadPreview),
        d.payloadChars > d.payloadPreview.length ? el('span', { class: 'muted' }, ' \u2026') : null),
      actions ? el('td', {}, el('button', { class: 'republish', disabled: d.held, title: d.held
        ? 'a consumer of the dead-letter queue holds it now' : null, onclick: async (event) => {
        event.target.disabled = true;
        const answer = await republishIds([d.id], result);
        if (answer) {
          markDone(answer.results);
        }
      } }, 'Republish')) : null,
      el('td', { class: 'outcome' }, d.held ? 'held' : '')));

    const filter = el('input', { id: 'dlq-filter', value: params.queue || '', placeholder: 'every dead-letter queue',
      'aria-label': 'dead-letter queue', spellcheck: 'false' });
    const filterForm = el('form', { class: 'inline', onsubmit: (event) => {
      event.preventDefault();
      location.hash = hash('dead-letters', { queue: filter.value });
    } }, el('label', { for: 'dlq-filter' }, 'Dead-letter queue '), filter, ' ',
    el('button', { type: 'submit' }, 'Show'), ' ',
    params.queue ? link('#/dead-letters', 'every queue') : null);

    updateButtons();
    return el('section', {},
      el('h1', {}, 'Dead letters'),
      el('p', { class: 'note' }, data.countCapped ? 'More than ' : '', integer.format(data.count),
        ' unexpired dead letter(s)', params.queue ? [' in ', el('strong', {}, params.queue)] : ' in every queue',
        actions ? '.' : '. Actions are disabled in this console (read only).'),
      el('div', { class: 'toolbar' }, filterForm, actions ? el('span', {}, republishSelected, ' ', purge) : null),
      result,
      data.rows.length === 0 ? el('p', { class: 'muted' }, 'No dead letters.') : el('table',
        { class: 'grid', id: 'dead-letters' },
        el('thead', {}, el('tr', {}, actions ? el('th', {}, selectAll) : null, el('th', { class: 'num' }, 'Id'),
          el('th', {}, 'Dead-letter queue'), el('th', {}, 'From queue'), el('th', { class: 'num' }, 'Deliveries'),
          el('th', {}, 'Last error'), el('th', {}, 'Dead-lettered'), el('th', {}, 'Payload'),
          actions ? el('th', {}, '') : null, el('th', {}, ''))),
        el('tbody', {}, rows)),
      el('div', { class: 'pager' },
        link(hash('dead-letters', { queue: params.queue }), '\u00ab First'), ' ',
        data.next ? link(hash('dead-letters', { queue: params.queue, after: data.next }), 'Next \u203a',
          { id: 'next-dead-letters' }) : el('span', { class: 'disabled' }, 'Next \u203a')));
  }

  // ---- housekeeping

  async function renderHousekeeping() {
    const h = await api('housekeeping');
    const now = h.serverNow;
    const threshold = h.reapIdleThresholdSeconds;
    const inProcess = h.inProcess;
    const interval = inProcess ? inProcess.intervalSeconds : 60;
    const parts = [el('h1', {}, 'Housekeeping')];
    const recent = [];

    if (inProcess) {
      const last = inProcess.lastRun;
      parts.push(el('h2', {}, 'The housekeeper of this process'),
        el('dl', { class: 'facts', id: 'housekeeper' },
          el('dt', {}, 'Schedule'), el('dd', {}, inProcess.running ? 'running, a tick every ' + duration(interval)
            : 'not scheduled (ticks only when called)'),
          el('dt', {}, 'Last tick'), el('dd', {}, last ? [timestamp(last.startedAt), ' (', ago(last.startedAt), '), ',
            last.outcome.toLowerCase(), ' in ', duration(last.durationMillis / 1000)] : 'none yet'),
          el('dt', {}, 'Leader'), el('dd', {}, !last ? '\u2014' : last.outcome === 'COMPLETED'
            ? 'this process did the last tick\u2019s work'
            : last.outcome === 'SKIPPED' ? 'another replica held the turn at the last tick' : 'the last tick failed'),
          el('dt', {}, 'Reaped, cleaned'), el('dd', {}, last ? [integer.format(last.reapedQueues), ' idle queue(s), ',
            integer.format(last.deletedExpiredMessages), ' expired message(s) at the last tick'] : '\u2014'),
          el('dt', {}, 'Failures in a row'), el('dd', {}, String(inProcess.consecutiveFailures))));
      if (h.processTotals) {
        parts.push(el('p', { class: 'note' }, 'Since this process started it reaped ',
          integer.format(h.processTotals.reaped || 0), ' queue(s) and deleted ',
          integer.format(h.processTotals.expiredDeleted || 0), ' expired message(s) (its msgqueue metrics).'));
      }
      if (inProcess.recentRuns.length > 0) {
        recent.push(el('h2', {}, 'Recent ticks'), el('table', { class: 'grid', id: 'runs' },
          el('thead', {}, el('tr', {}, el('th', {}, 'Tick'), el('th', {}, 'Outcome'), el('th', { class: 'num' }, 'Took'),
            el('th', { class: 'num' }, 'Queues reaped'), el('th', { class: 'num' }, 'Expired deleted'),
            el('th', {}, 'Failure'))),
          el('tbody', {}, inProcess.recentRuns.slice(0, 10).map((run) => el('tr', {},
            el('td', {}, timestamp(run.startedAt)), el('td', {}, run.outcome.toLowerCase()),
            el('td', { class: 'num' }, duration(run.durationMillis / 1000)),
            el('td', { class: 'num' }, integer.format(run.reapedQueues)),
            el('td', { class: 'num' }, integer.format(run.deletedExpiredMessages)),
            el('td', {}, run.failure || ''))))));
      }
    } else {
      parts.push(el('p', { class: 'note', id: 'housekeeper' }, 'No housekeeper runs in this process (the standalone ',
        'console, or a service with msgqueue.housekeeper.enabled=false), so its ticks are not known here: a tick leaves ',
        'no record in the database. What the database shows is below: whether a tick runs right now, and whether ',
        'the work a housekeeper does is being done.'));
    }

    parts.push(el('h2', {}, 'In the database now'));
    const lock = h.lockHolder;
    parts.push(el('dl', { class: 'facts', id: 'database-now' },
      el('dt', {}, 'Tick running'), el('dd', {}, lock ? ['yes: backend ', String(lock.pid),
        lock.applicationName ? [' (', lock.applicationName, ')'] : '', ' holds the housekeepers\u2019 lock since ',
        timestamp(lock.since)] : 'no (a tick holds the lock only while it works)'),
      el('dt', {}, 'Idle queues'), el('dd', {}, integer.format(h.idleQueues.pastThreshold),
        h.idleQueues.pastThreshold >= h.idleQueues.checked ? '+' : '', ' auto-deleted queue(s) idle past ',
        duration(threshold), '; ', integer.format(h.idleQueues.reapable),
        h.idleQueues.pastThreshold >= h.idleQueues.checked ? ' of the ' + integer.format(h.idleQueues.checked)
          + ' idle longest' : '', ' hold no live message and go at the next tick',
        h.idleQueues.oldestReapableLastActive ? ['; the longest idle since ',
          timestamp(h.idleQueues.oldestReapableLastActive)] : ''),
      el('dt', {}, 'Expired messages'), el('dd', {}, h.expired.messages === null ? 'not counted yet'
        : [count(h.expired.messages, h.statistics && h.statistics.sampled), ' waiting for the cleanup'],
      h.expired.oldestExpiresAt ? ['; the oldest expired ', ago(h.expired.oldestExpiresAt, now)] : '')));

    const warnings = [];
    const reapableSince = h.idleQueues.oldestReapableLastActive;
    if (reapableSince && (Date.parse(now) - Date.parse(reapableSince)) / 1000 > threshold + 3 * interval) {
      warnings.push('Idle, empty auto-deleted queues have waited more than three housekeeping intervals past the '
        + 'threshold: no housekeeper seems to be reaping.');
    }
    if (h.expired.oldestExpiresAt && (Date.parse(now) - Date.parse(h.expired.oldestExpiresAt)) / 1000
      > 3 * interval + 60) {
      warnings.push('Expired messages have waited more than three housekeeping intervals: no housekeeper seems to be '
        + 'cleaning up, or it cannot keep up.');
    }
    for (const warning of warnings) {
      parts.push(el('p', { class: 'warn', role: 'status' }, warning));
    }
    return el('section', {}, parts, recent);
  }

  // ---- throughput

  const SVG = 'http://www.w3.org/2000/svg';

  function svg(tag, attributes, ...children) {
    const element = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      element.setAttribute(name, String(value));
    }
    for (const child of children) {
      element.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return element;
  }

  /** A line chart of one series over the window [start, end] (epoch millis), built as SVG elements. */
  function chart(series, start, end) {
    const width = 560;
    const height = 150;
    const left = 56;
    const right = 24;
    const bottom = 24;
    const top = 10;
    const points = series.points.filter((p) => p.perSecond !== null);
    const peak = Math.max(1, ...points.map((p) => p.perSecond));
    const x = (at) => left + (width - left - right) * Math.max(0, (Date.parse(at) - start)) / (end - start);
    const y = (v) => top + (height - top - bottom) * (1 - v / peak);
    const chartSvg = svg('svg', { viewBox: '0 0 ' + width + ' ' + height, class: 'chart', role: 'img',
      'aria-label': series.label + ' per second' });
    chartSvg.append(svg('line', { x1: left, y1: y(0), x2: width - right, y2: y(0), class: 'axis' }));
    chartSvg.append(svg('line', { x1: left, y1: top, x2: left, y2: y(0), class: 'axis' }));
    chartSvg.append(svg('text', { x: left - 6, y: top + 4, class: 'tick', 'text-anchor': 'end' }, decimal.format(peak)));
    chartSvg.append(svg('text', { x: left - 6, y: y(0), class: 'tick', 'text-anchor': 'end' }, '0'));
    const minutes = (end - start) / 60000;
    const step = minutes <= 2 ? 0.5 : minutes <= 6 ? 1 : 5;
    for (let m = 0; m <= minutes + 1e-9; m += step) {
      const at = new Date(end - m * 60000).toISOString();
      chartSvg.append(svg('text', { x: x(at), y: height - 6, class: 'tick', 'text-anchor': m === 0 ? 'end' : 'middle' },
        m === 0 ? 'now' : '\u2212' + (m < 1 ? m * 60 + ' s' : m + ' min')));
    }
    if (points.length > 0) {
      const path = points.map((p, i) => (i === 0 ? 'M' : 'L') + x(p.at).toFixed(1) + ' ' + y(p.perSecond).toFixed(1))
        .join(' ');
      chartSvg.append(svg('path', { d: path, class: 'line' }));
    }
    return chartSvg;
  }

  async function renderThroughput() {
    const t = await api('throughput');
    const parts = [el('h1', {}, 'Throughput'),
      el('p', { class: 'note' }, 'Per second over the last ', duration(t.historySeconds), ', one point per ',
        duration(t.intervalSeconds), ' sampled by this console since ', timestamp(t.since), '. ',
        session.processCounters ? 'Figures marked \u201cthis process\u201d are this service\u2019s msgqueue metrics. '
          : 'This process has no msgqueue metrics of its own (the standalone console). ',
        'Rows written to the message table count every client of the database, as PostgreSQL\u2019s cumulative ',
        'statistics do (aborted transactions included).')];
    if (t.samples < 2) {
      parts.push(el('p', { class: 'muted' }, 'The first figures appear one sampling interval after the console ',
        'started.'));
    }
    // From the first sample (the console's start) or the start of the history, whichever is later.
    const end = Date.now();
    const start = Math.max(end - t.historySeconds * 1000, t.since ? Math.min(Date.parse(t.since), end - 60000)
      : end - 60000);
    const grid = el('div', { class: 'charts' });
    parts.push(grid);
    for (const series of t.series) {
      const values = series.points.filter((p) => p.perSecond !== null).map((p) => p.perSecond);
      const last = values.length ? values[values.length - 1] : null;
      const average = values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
      grid.append(el('div', { class: 'series', 'data-series': series.id },
        el('h2', {}, series.label),
        el('p', { class: 'figures' }, 'now ', last === null ? '\u2014' : decimal.format(last), '/s \u00b7 average ',
          average === null ? '\u2014' : decimal.format(average), '/s \u00b7 peak ',
          values.length ? decimal.format(Math.max(...values)) : '\u2014', '/s'),
        chart(series, start, end)));
    }
    return el('section', {}, parts);
  }

  // ---- start

  async function start() {
    try {
      session = await api('session');
    } catch (e) {
      main.replaceChildren(el('div', { class: 'error', role: 'alert' }, 'The console\u2019s API does not answer: ',
        e.message));
      return;
    }
    mode.replaceChildren(session.actionsEnabled ? 'actions enabled' : 'read only');
    mode.classList.toggle('actions', session.actionsEnabled);
    window.addEventListener('hashchange', render);
    await render();
  }

  start();
})();
