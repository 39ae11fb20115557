// The demo page: upload, order, and a live list of orders. The realtime token comes from this app's
// backend (it holds the TDP key). A publication on the person's channel says a task changed: the list
// is read again, and again until the app's own record (moved by TDP's callbacks) has caught up.
const $ = (selector) => document.querySelector(selector);
const finalStatuses = new Set(['SUCCEEDED', 'FAILED', 'CANCELED', 'REJECTED']);
let sourceAssetId = null;
let idempotencyKey = null; // one per order being placed, reused if the same submit is retried
const openTimelines = new Set();

// Sent with every change: the server refuses changes without it (another site's page cannot read it).
const csrfToken = document.querySelector('meta[name="csrf-token"]').content;

async function api(method, path, body, headers = {}) {
  if (method !== 'GET') headers = { ...headers, 'x-csrf-token': csrfToken };
  const response = await fetch(path, {
    method,
    headers: body instanceof FormData ? headers : { 'content-type': 'application/json', ...headers },
    body: body instanceof FormData ? body : body === undefined ? undefined : JSON.stringify(body),
  });
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  if (!response.ok)
    throw Object.assign(new Error(data?.detail ?? `HTTP ${response.status}`), { problem: data });
  return data;
}

function showErrors(problem) {
  const list = $('#form-errors');
  list.replaceChildren();
  const items = problem?.errors?.length
    ? problem.errors.map((e) => e.message)
    : problem
      ? [problem.detail]
      : [];
  for (const text of items) list.append(Object.assign(document.createElement('li'), { textContent: text }));
}

$('#file').addEventListener('change', async (event) => {
  const file = event.target.files[0];
  sourceAssetId = null;
  $('#submit').disabled = true;
  if (!file) return;
  $('#upload-status').textContent = `Uploading ${file.name}…`;
  if (!$('#name').value) $('#name').value = file.name.replace(/\.zip$/i, '');
  const form = new FormData();
  form.append('file', file);
  try {
    const asset = await api('POST', '/api/assets', form);
    sourceAssetId = asset.id;
    $('#upload-status').textContent =
      `${asset.fileName} · ${(asset.sizeBytes / 1024).toFixed(1)} KiB · ${asset.state}`;
    $('#upload-status').dataset.state = asset.state;
    $('#submit').disabled = false;
    showErrors(null);
  } catch (error) {
    $('#upload-status').textContent = `Upload failed: ${error.message}`;
  }
});

const mode = () => document.querySelector('input[name="mode"]:checked').value;
for (const radio of document.querySelectorAll('input[name="mode"]'))
  radio.addEventListener('change', () => {
    $('#watermark-label').hidden = mode() === 'ARCHIVE_CLEAN_ONLY';
  });

$('#order-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  idempotencyKey ??= crypto.randomUUID();
  $('#submit').disabled = true;
  try {
    await api(
      'POST',
      '/api/orders',
      {
        name: $('#name').value,
        sourceAssetId,
        processingMode: mode(),
        watermarkText: mode() === 'ARCHIVE_CLEAN_ONLY' ? null : $('#watermark').value,
        approveBeforePublish: $('#approve-first').checked,
      },
      { 'idempotency-key': idempotencyKey },
    );
    idempotencyKey = null;
    showErrors(null);
    await refresh();
  } catch (error) {
    // A network failure keeps the key, so pressing again cannot create a second order.
    if (error.problem) idempotencyKey = null;
    showErrors(error.problem ?? { detail: error.message });
  } finally {
    $('#submit').disabled = sourceAssetId === null;
  }
});

function cell(...children) {
  const td = document.createElement('td');
  td.append(...children);
  return td;
}

function element(tag, properties = {}, ...children) {
  const node = Object.assign(document.createElement(tag), properties);
  node.append(...children);
  return node;
}

async function toggleTimeline(order, container) {
  if (openTimelines.has(order.id)) {
    openTimelines.delete(order.id);
    container.hidden = true;
    return;
  }
  openTimelines.add(order.id);
  await renderTimeline(order.id, container);
}

const eventLabels = {
  ORDER_CREATED: 'order saved, submit queued',
  SUBMITTED_TO_TDP: 'TDP accepted the task',
  SUBMIT_REJECTED: 'TDP refused the task',
  CANCEL_REQUESTED: 'cancel requested',
  SEQUENCE_GAP: 'a callback arrived before an earlier one',
  RECONCILED: 'brought up to date from TDP',
  APPROVED_BY_OWNER: 'you approved the result',
  REJECTED_BY_OWNER: 'you rejected the result',
  PUBLISHED: 'the result was published',
};

/** One line per event; a run of progress callbacks becomes one line with its range. */
function timelineLines(items) {
  const lines = [];
  for (const event of items) {
    const last = lines.at(-1);
    const progress = event.kind === 'execution.progress';
    if (progress && last?.kind === 'execution.progress') {
      last.to = event.detail.progress ?? last.to;
      last.count += 1;
      continue;
    }
    lines.push({ ...event, from: event.detail.progress, to: event.detail.progress, count: 1 });
  }
  const start = items.length ? new Date(items[0].at).getTime() : 0;
  return lines.map((line) => {
    const offset = `+${((new Date(line.at).getTime() - start) / 1000).toFixed(2)} s`;
    const label =
      line.kind === 'execution.progress'
        ? `progress ${line.from ?? 0}% → ${line.to ?? 0}%${line.count > 1 ? ` (${line.count} callbacks)` : ''}`
        : (eventLabels[line.kind] ??
          `${line.kind}${line.detail.sequence ? ` (#${line.detail.sequence})` : ''}`);
    return `${offset}  ${label}`;
  });
}

async function renderTimeline(orderId, container) {
  const { items } = await api('GET', `/api/orders/${orderId}/timeline`);
  container.hidden = false;
  container.firstChild.replaceChildren(
    element(
      'ol',
      { className: 'timeline' },
      ...timelineLines(items).map((text) => element('li', { textContent: text })),
    ),
  );
}

function render(orders) {
  $('#empty').hidden = orders.length > 0;
  $('#orders').hidden = orders.length === 0;
  const rows = orders.flatMap((order) => {
    const row = element('tr');
    row.dataset.orderId = order.id;
    // TDP says live that the task waits for this person's approval (its step `approve`).
    const awaiting = awaitingApproval(order);
    const shown = awaiting ? 'AWAITING_APPROVAL' : order.businessStatus;
    const status = element('span', { className: 'status', textContent: shown });
    status.dataset.status = shown;
    // The timeline opens in a row of its own under the order.
    const timeline = element(
      'tr',
      { className: 'timeline-row', hidden: true },
      element('td', { colSpan: 6 }),
    );
    timeline.dataset.timelineOf = order.id;
    const name = cell(
      element('div', { textContent: order.name }),
      element('button', {
        className: 'secondary',
        type: 'button',
        textContent: 'Timeline',
        onclick: () => toggleTimeline(order, timeline),
      }),
    );
    if (openTimelines.has(order.id)) renderTimeline(order.id, timeline);
    const statusCell = cell(status);
    if (order.failure)
      statusCell.append(
        element('div', { className: 'failure', textContent: order.failure.message ?? order.failure.code }),
      );
    const result = order.resultAssetId
      ? element('a', {
          href: `/api/assets/${order.resultAssetId}/content`,
          textContent: 'Download',
          className: 'download',
        })
      : '';
    const decide = (decision) => () =>
      api('POST', `/api/orders/${order.id}/${decision}`)
        .catch((error) =>
          statusCell.append(element('div', { className: 'failure', textContent: error.message })),
        )
        .then(refresh);
    const actions =
      finalStatuses.has(order.businessStatus) || order.cancelRequested
        ? ''
        : element('button', {
            className: 'secondary cancel',
            type: 'button',
            textContent: 'Cancel',
            onclick: () => api('POST', `/api/orders/${order.id}/cancel`).then(refresh),
          });
    const decisions = awaiting
      ? [
          element('button', {
            className: 'approve',
            type: 'button',
            textContent: 'Approve',
            onclick: decide('approve'),
          }),
          element('button', {
            className: 'secondary reject',
            type: 'button',
            textContent: 'Reject',
            onclick: decide('reject'),
          }),
        ]
      : [];
    row.append(
      name,
      cell(order.processingMode === 'ARCHIVE_CLEAN_ONLY' ? 'clean' : `clean + “${order.watermarkText}”`),
      statusCell,
      cell(element('progress', { max: 100, value: order.progress }), ` ${order.progress}%`),
      cell(result),
      cell(...decisions, actions),
    );
    return [row, timeline];
  });
  $('#orders tbody').replaceChildren(...rows);
}

// What TDP's realtime says about each task (newest version wins), and how far each order may lag it.
const live = new Map();
const lifecycleRank = { PENDING: 1, RUNNING: 2, SUCCEEDED: 3, FAILED: 3, CANCELLED: 3, TIMED_OUT: 3 };
const orderRank = {
  SUBMITTING: 0,
  SUBMITTED: 1,
  RUNNING: 2,
  CANCELING: 2,
  SUCCEEDED: 3,
  FAILED: 3,
  CANCELED: 3,
  REJECTED: 3,
};

/** Orders that may wait for approval but were not seen live yet (a page just loaded): ask once. */
const asked = new Set();
async function learnApprovals(orders) {
  const unseen = orders.filter(
    (o) => o.approveBeforePublish && o.taskId && !finalStatuses.has(o.businessStatus) && !live.has(o.taskId),
  );
  await Promise.all(
    unseen
      .filter((o) => !asked.has(o.id))
      .map(async (o) => {
        asked.add(o.id);
        const state = await api('GET', `/api/orders/${o.id}/approval`).catch(() => null);
        if (state?.taskVersion && !live.has(o.taskId))
          live.set(o.taskId, {
            version: BigInt(state.taskVersion),
            status: state.lifecycleStatus,
            businessStatus: state.businessStatus,
            progress: null,
          });
      }),
  );
}

function awaitingApproval(order) {
  if (!order.approveBeforePublish || finalStatuses.has(order.businessStatus) || !order.taskId) return false;
  return live.get(order.taskId)?.businessStatus === 'WAITING_USER_ACTION';
}

/** This app's record of the order (moved by TDP's callbacks) has not caught up with what TDP showed live. */
function behind(order) {
  if (finalStatuses.has(order.businessStatus)) return false;
  if (!order.taskId) return true; // the submit is on its way to TDP
  const seen = live.get(order.taskId);
  return seen ? lifecycleRank[seen.status] > orderRank[order.businessStatus] : false;
}

function withLiveProgress(order) {
  const seen = order.taskId && live.get(order.taskId);
  if (!seen || finalStatuses.has(order.businessStatus)) return order;
  return { ...order, progress: Math.max(order.progress, seen.progress ?? 0) };
}

let refreshing = null;
let again = false;
const catchUp = { timer: null, backstop: null, delayMs: 200 };
async function refresh() {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    do {
      again = false;
      const { items } = await api('GET', '/api/orders');
      await learnApprovals(items);
      render(items.map(withLiveProgress));
      // Read again, backing off to every 2 s, until the callbacks have brought the orders level.
      if (items.some(behind)) {
        if (!catchUp.timer)
          catchUp.timer = setTimeout(() => {
            catchUp.timer = null;
            refresh();
          }, catchUp.delayMs);
        catchUp.delayMs = Math.min(catchUp.delayMs * 2, 2_000);
      } else {
        catchUp.delayMs = 200;
        // A backstop while an order is still open: a publication missed for good (TDP restarted and its
        // history with it, so the reconnect recovered nothing) would otherwise leave the page showing a
        // state this app's record has since left, moved by a callback that came late.
        if (!catchUp.backstop && items.some((o) => !finalStatuses.has(o.businessStatus)))
          catchUp.backstop = setTimeout(() => {
            catchUp.backstop = null;
            refresh();
          }, 5_000);
      }
    } while (again);
  })().finally(() => {
    refreshing = null;
  });
  return refreshing;
}

window.publications = 0;
function onPublication(context) {
  window.publications += 1;
  const message = context.data;
  if (message?.kind === 'task.summary') {
    const known = live.get(message.taskId);
    if (!known || BigInt(message.taskVersion) > known.version)
      live.set(message.taskId, {
        version: BigInt(message.taskVersion),
        status: message.lifecycleStatus,
        businessStatus: message.businessStatus,
        progress: message.progressPercent,
      });
  }
  refresh();
}

async function connectLive() {
  const fetchToken = async () => (await api('GET', '/api/realtime/token')).token;
  const { token, url } = await api('GET', '/api/realtime/token');
  const centrifuge = new Centrifuge(url, { token, getToken: fetchToken });
  const live = $('#live');
  centrifuge.on('connecting', () => {
    live.dataset.state = 'reconnecting';
    live.textContent = 'reconnecting…';
  });
  centrifuge.on('connected', () => {
    live.dataset.state = 'live';
    live.textContent = 'live';
    refresh(); // whatever happened while away
  });
  centrifuge.on('publication', onPublication);
  centrifuge.connect();
}

refresh();
connectLive().catch((error) => {
  $('#live').textContent = `offline: ${error.message}`;
});
