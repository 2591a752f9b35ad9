/* memcanal dashboard: the API's hosts, VMs and decisions, drawn as SVG.
 *
 * Plain script with no library and no network beyond the API it is
 * served by. Every few seconds it reads GET /hosts, /instances,
 * /memory_servers, /decisions and the selected VM's reports, and
 * redraws. The token is
 * the operator's (noauth2 takes "admin"); it stays in sessionStorage,
 * so it is gone with the tab.
 */
'use strict';

(function () {
  const VERSION = 'memcanal 1.10';
  const REFRESH_MS = 5000;
  const REPORTS = 60;
  const RECENT = 8;
  const GIB = 2 ** 30;
  const MIB = 2 ** 20;
  const SVG_NS = 'http://www.w3.org/2000/svg';
  // The API's root: this page is <root>/dashboard, wherever it is mounted.
  const API = location.pathname.replace(/\/dashboard\/?$/, '');
  const COLORS = ['#2b6cb0', '#dd6b20', '#38a169', '#805ad5', '#d53f8c',
                  '#319795', '#b7791f'];
  // A host's memory map, in the order drawn: its VMs' memory it holds
  // (measured demand, then the rest), what it lends, what is free, then,
  // past its capacity, what its VMs keep on other hosts.
  const SEGMENTS = [
    {key: 'demand', label: 'VMs: measured demand', color: '#2b6cb0'},
    {key: 'idle', label: 'VMs: allocated, not in demand', color: '#90cdf4'},
    {key: 'lent', label: 'lent to other hosts', color: '#dd6b20'},
    {key: 'free', label: 'free', color: '#e2e8f0'},
    {key: 'borrowed', label: 'borrowed from other hosts',
     color: 'url(#hatch)'},
  ];

  const state = {
    hosts: [], instances: [], servers: [], pending: [], recent: [],
    reports: [], selected: sessionStorage.getItem('memcanal.vm'),
  };
  const tokenInput = document.getElementById('token');
  const vmSelect = document.getElementById('vm-select');
  tokenInput.value = sessionStorage.getItem('memcanal.token') || 'admin';

  function byId(id) { return document.getElementById(id); }

  // -- Talking to the API ------------------------------------------------

  // An answer of the API other than a success, or no answer at all
  // (status 0): its message names the status and the API's error code.
  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // The token goes in a header only, never in a URL (which logs keep).
  // ``request``, when given, is sent as the JSON body.
  async function api(resource, method, request) {
    const headers = {'X-Auth-Token': tokenInput.value,
                     'OpenStack-API-Version': VERSION,
                     'Accept': 'application/json'};
    if (request !== undefined) headers['Content-Type'] = 'application/json';
    let response;
    try {
      response = await fetch(API + resource, {
        method: method || 'GET', headers: headers,
        body: request === undefined ? undefined : JSON.stringify(request),
      });
    } catch (error) {
      throw new ApiError(0, 'The API does not answer (' + error.message
                         + ').');
    }
    const body = await response.json().catch(() => null);
    if (!response.ok) {
      const error = body && body.errors && body.errors[0];
      throw new ApiError(response.status, response.status + ' '
        + (error ? error.code + ': ' + error.detail : response.statusText));
    }
    return body;
  }

  // A path of the API from its parts, each quoted: an identifier the API
  // returned is data, never a path to follow.
  function apiPath(...parts) {
    return parts.map(part => '/' + encodeURIComponent(part)).join('');
  }

  // -- Building elements -------------------------------------------------

  function fill(node, attrs, children) {
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== undefined && value !== null) {
        node.setAttribute(name, value);
      }
    }
    for (const child of children.flat()) {
      if (child !== undefined && child !== null && child !== false) {
        node.append(child instanceof Node ? child : String(child));
      }
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    return fill(document.createElementNS(SVG_NS, tag), attrs, children);
  }

  function html(tag, attrs, ...children) {
    return fill(document.createElement(tag), attrs, children);
  }

  // -- Words and numbers -------------------------------------------------

  function bytes(value) {
    if (value === null || value === undefined) return '–';
    if (value === 0) return '0';
    // Three significant digits at most sizes: a policy's steps are small.
    const size = Math.abs(value);
    if (size >= 10 * GIB) return (value / GIB).toFixed(1) + ' GiB';
    if (size >= GIB) return (value / GIB).toFixed(2) + ' GiB';
    return Math.round(value / MIB) + ' MiB';
  }

  // The signed difference, after a size's change.
  function change(before, after) {
    if (before === null || after === null) return '';
    const sign = after > before ? '+' : '−';
    return ' (' + sign + bytes(Math.abs(after - before)) + ')';
  }

  function percent(value) {
    return value === null || value === undefined ? '–'
      : Math.round(100 * value) + '%';
  }

  function ratio(value) {
    return value === null || value === undefined ? '–' : value.toFixed(3);
  }

  function shortId(uuid) { return uuid ? uuid.slice(0, 8) : '–'; }

  function utcTime(iso) {
    return new Date(iso).toISOString().slice(11, 19);
  }

  // Hosts appear by uuid in the API, by name in a policy's outputs.
  function hostName(ref) {
    const host = state.hosts.find(h => h.uuid === ref || h.name === ref);
    return host ? host.name : shortId(ref);
  }

  function instance(uuid) {
    return state.instances.find(i => i.uuid === uuid);
  }

  // What the VM has now: what its guest reached of the target decisions
  // set (1.9), else the target, else its memory: as the service counts it.
  function memoryOf(vm) {
    if (vm.reached_bytes !== null && vm.reached_bytes !== undefined) {
      return vm.reached_bytes;
    }
    return vm.target_bytes !== null ? vm.target_bytes : vm.allocated_bytes;
  }

  function vmLabel(uuid) {
    const vm = instance(uuid);
    if (!vm) return 'VM ' + shortId(uuid);
    return 'VM ' + shortId(uuid) + (vm.flavor ? ' (' + vm.flavor + ')' : '');
  }

  // -- Axes --------------------------------------------------------------

  // Round steps covering lo..hi in about ``count`` intervals.
  function ticks(lo, hi, count, steps) {
    const raw = (hi - lo) / count;
    if (!(raw > 0)) return [lo];
    let step;
    if (steps) {
      step = steps.find(s => s >= raw) || steps[steps.length - 1];
    } else {
      const magnitude = 10 ** Math.floor(Math.log10(raw));
      step = [1, 2, 5, 10].map(m => m * magnitude).find(s => s >= raw);
    }
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9;
         v += step) {
      out.push(v);
    }
    return out;
  }

  function bytesAxis(hi) {
    const unit = hi >= 2 * GIB ? GIB : MIB;
    const name = unit === GIB ? ' GiB' : ' MiB';
    return {
      lo: 0, hi: hi,
      ticks: ticks(0, hi / unit, 5).map(v => v * unit),
      format: v => +(v / unit).toFixed(2) + name,
    };
  }

  const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
                      3600, 7200, 21600, 43200, 86400].map(s => s * 1000);

  function timeAxis(lo, hi) {
    if (hi - lo < 60000) {
      lo -= 30000;
      hi += 30000;
    }
    const marks = ticks(lo, hi, 5, TIME_STEPS);
    // Seconds only when the marks are less than a minute apart.
    const end = marks.length > 1 && marks[1] - marks[0] < 60000 ? 19 : 16;
    return {lo: lo, hi: hi, ticks: marks,
            format: v => new Date(v).toISOString().slice(11, end)};
  }

  // -- Charts ------------------------------------------------------------

  function legend(items, x, y, width) {
    const group = svg('g', {class: 'legend'});
    let dx = 0;
    let dy = 0;
    for (const item of items) {
      const size = 22 + 6.2 * item.label.length;
      if (dx > 0 && dx + size > width) {
        dx = 0;
        dy += 16;
      }
      group.append(
        item.line
          ? svg('line', {class: item.line, x1: x + dx + 6, x2: x + dx + 6,
                         y1: y + dy - 11, y2: y + dy + 2})
          : svg('rect', {x: x + dx, y: y + dy - 9, width: 12, height: 10,
                         fill: item.color, stroke: '#a0aec0',
                         'stroke-width': 0.5}),
        svg('text', {x: x + dx + 16, y: y + dy}, item.label));
      dx += size + 12;
    }
    return group;
  }

  /* A line chart: ``series`` [{name, points: [[x, y]...], band}], ``x``
   * and ``y`` axes {lo, hi, ticks, format}, ``verticals`` and
   * ``horizontals`` [{at, label, kind}] drawn as marked lines. A
   * series' ``band`` {low, high} ([[x, y]...] each, as API 1.8 gives a
   * sampled estimate's 95 % interval) is shaded under its line. */
  function lineChart(spec) {
    const width = 560;
    const height = 300;
    const margin = {left: 62, right: 18, top: 34, bottom: 30};
    const {x, y} = spec;
    const px = v => margin.left + (v - x.lo) / ((x.hi - x.lo) || 1)
      * (width - margin.left - margin.right);
    const py = v => height - margin.bottom - (v - y.lo) / ((y.hi - y.lo) || 1)
      * (height - margin.top - margin.bottom);
    const root = svg('svg', {viewBox: '0 0 ' + width + ' ' + height,
                             role: 'img', 'aria-label': spec.title,
                             'data-vm': spec.vm});
    const grid = svg('g', {class: 'grid'});
    const axis = svg('g', {class: 'axis'});
    for (const v of y.ticks) {
      grid.append(svg('line', {x1: margin.left, x2: width - margin.right,
                               y1: py(v), y2: py(v)}));
      axis.append(svg('text', {class: 'tick', x: margin.left - 6,
                               y: py(v) + 4, 'text-anchor': 'end'},
                      y.format(v)));
    }
    for (const v of x.ticks) {
      axis.append(svg('text', {class: 'tick', x: px(v),
                               y: height - margin.bottom + 16,
                               'text-anchor': 'middle'}, x.format(v)));
    }
    axis.append(svg('path', {
      fill: 'none',
      d: 'M' + margin.left + ',' + margin.top + 'V'
        + (height - margin.bottom) + 'H' + (width - margin.right)}));
    root.append(grid, axis);
    spec.series.forEach((series, index) => {
      if (!series.band) return;
      const edge = points => points.map(p => px(p[0]) + ',' + py(p[1]));
      root.append(svg('path', {
        class: 'band', fill: COLORS[index % COLORS.length],
        'data-band': series.name,
        d: 'M' + edge(series.band.high).concat(
          edge(series.band.low.slice().reverse())).join('L') + 'Z'}));
    });
    spec.series.forEach((series, index) => {
      const color = COLORS[index % COLORS.length];
      const points = series.points.map(p => px(p[0]) + ',' + py(p[1]));
      root.append(svg('path', {class: 'series', stroke: color,
                               'data-series': series.name,
                               d: 'M' + points.join('L')}));
      if (series.points.length < 12) {
        for (const p of series.points) {
          root.append(svg('circle', {cx: px(p[0]), cy: py(p[1]), r: 2.5,
                                     fill: color}));
        }
      }
    });
    for (const line of spec.horizontals || []) {
      root.append(
        svg('line', {class: 'marker ' + line.kind, x1: margin.left,
                     x2: width - margin.right, y1: py(line.at),
                     y2: py(line.at)}),
        svg('text', {class: 'note', x: width - margin.right - 4,
                     y: py(line.at) - 4, 'text-anchor': 'end'}, line.label));
    }
    (spec.verticals || []).forEach((line, index) => {
      const at = px(line.at);
      const right = at > width * 0.7;
      root.append(
        svg('line', {class: 'marker ' + line.kind,
                     'data-bytes': line.at, x1: at, x2: at,
                     y1: margin.top, y2: height - margin.bottom}),
        svg('text', {class: 'note', x: at + (right ? -4 : 4),
                     y: margin.top + 12 + 13 * index,
                     'text-anchor': right ? 'end' : 'start'}, line.label));
    });
    root.append(legend(
      spec.series.map((s, index) => ({
        label: s.band ? s.name + ' (95 % band)' : s.name,
        color: COLORS[index % COLORS.length]})),
      margin.left, 14, width - margin.left - margin.right));
    return root;
  }

  function empty(text) { return html('p', {class: 'empty'}, text); }

  // -- Hosts -------------------------------------------------------------

  function segments(host) {
    const resident = host.resident_bytes !== null ? host.resident_bytes
      : host.allocated_bytes;
    const demand = Math.min(host.demand_bytes, resident);
    const sizes = {
      demand: demand,
      idle: resident - demand,
      lent: host.lent_bytes,
      free: Math.max(0, host.capacity_bytes - resident - host.lent_bytes),
      borrowed: host.borrowed_bytes,
    };
    return SEGMENTS.map(s => Object.assign({bytes: sizes[s.key] || 0}, s));
  }

  // A host name long enough to run under its bar is cut; its title (a
  // tooltip) gives it whole.
  const LABEL_CHARS = 17;

  function fitted(text, chars) {
    return text.length > chars ? text.slice(0, chars - 1) + '…' : text;
  }

  // Under the host's name: what its agent registered it as, and on a
  // host nova does not manage (Xen) that placement and migrations pass
  // it by (doc/xen.md).
  function hypervisorNote(host, y) {
    const type = host.hypervisor_type || '';
    const note = host.nova_managed === false ? type + ' · not nova\'s' : type;
    return svg('text', {x: 0, y: y, class: 'note host-hypervisor'}, note,
               svg('title', {}, host.nova_managed === false
                 ? 'No placement ratio, nova filter or migration applies: '
                   + 'its VMs are resized by balloon only.'
                 : 'hypervisor: ' + (type || 'not registered')));
  }

  function drawHosts() {
    const target = byId('host-map');
    if (!state.hosts.length) {
      target.replaceChildren(empty('No host has registered yet.'));
      return;
    }
    const width = 640;
    const labelWidth = 120;
    const barWidth = width - labelWidth - 12;
    const rowHeight = 58;
    const rows = state.hosts.map(host => ({host: host,
                                           parts: segments(host)}));
    // Each bar at its own host's scale: a small host running hot reads
    // as clearly as a large one beside it; the labels give the sizes.
    const scaleOf = row => barWidth / (Math.max(
      row.host.capacity_bytes,
      row.parts.reduce((sum, part) => sum + part.bytes, 0)) || 1);
    const height = rows.length * rowHeight + 44;
    const root = svg('svg', {viewBox: '0 0 ' + width + ' ' + height,
                             role: 'img', 'aria-label': 'hosts memory map'});
    root.append(svg('defs', {}, svg(
      'pattern', {id: 'hatch', width: 6, height: 6,
                  patternUnits: 'userSpaceOnUse',
                  patternTransform: 'rotate(45)'},
      svg('rect', {width: 6, height: 6, fill: '#e9d8fd'}),
      svg('line', {x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#805ad5',
                   'stroke-width': 2.5}))));
    rows.forEach((row, index) => {
      const host = row.host;
      const scale = scaleOf(row);
      const top = 6 + index * rowHeight;
      const group = svg('g', {class: 'host', 'data-host': host.name});
      group.append(
        svg('text', {x: 0, y: top + 15, 'font-weight': 600},
            fitted(host.name, LABEL_CHARS), svg('title', {}, host.name)),
        svg('text', {x: 0, y: top + 30,
                     class: 'note host-state-' + host.state},
            host.state + ' · ' + host.instance_count + ' VMs'),
        hypervisorNote(host, top + 44));
      let x = labelWidth;
      for (const part of row.parts) {
        if (part.bytes <= 0) continue;
        const w = part.bytes * scale;
        group.append(svg('rect', {
          class: 'seg seg-' + part.key, 'data-bytes': part.bytes,
          x: x, y: top + 2, width: w, height: 24, fill: part.color},
        svg('title', {}, part.label + ': ' + bytes(part.bytes))));
        if (w > 56) {
          group.append(svg('text', {
            x: x + w / 2, y: top + 18, 'text-anchor': 'middle',
            class: part.key === 'demand' || part.key === 'lent'
              ? 'on-dark' : null}, bytes(part.bytes)));
        }
        x += w;
      }
      const capacity = labelWidth + host.capacity_bytes * scale;
      group.append(
        svg('line', {class: 'capacity', x1: capacity, x2: capacity,
                     y1: top - 2, y2: top + 30}),
        svg('text', {class: 'note', x: labelWidth, y: top + 44},
            'VMs ' + bytes(host.allocated_bytes) + ' of '
            + bytes(host.capacity_bytes) + ' capacity · demand '
            + bytes(host.demand_bytes) + ' (' + percent(host.utilization)
            + ') · lent ' + bytes(host.lent_bytes) + ' · borrowed '
            + bytes(host.borrowed_bytes)));
      root.append(group);
    });
    root.append(legend(
      SEGMENTS.map(s => ({label: s.label, color: s.color})).concat(
        [{label: 'capacity', line: 'capacity'}]),
      labelWidth, height - 26, barWidth));
    target.replaceChildren(root);
  }

  // -- Hosts admitted to memory pooling -------------------------------

  // An operator's switch: PATCH ``path`` with ``body``, say ``done`` (or
  // ``failed`` and why) in ``where``, and redraw.
  async function flip(button, path, body, done, failed, where) {
    button.disabled = true;
    try {
      await api(path, 'PATCH', body);
      showResult(done, 'ok', where);
    } catch (error) {
      showResult(failed + ': ' + error.message, 'error', where);
    }
    await refresh();
  }

  // A host registers on first use with a key of its own: it neither
  // borrows nor lends until an operator admits it here.
  function toggleAdmission(host, button) {
    const admit = !host.pooling_admitted;
    return flip(button, apiPath('hosts', host.uuid),
                {pooling_admitted: admit},
                (admit ? 'Admitted ' + host.name + ' to'
                       : 'Stopped ' + host.name + ' from')
                + ' memory pooling.',
                'Could not ' + (admit ? 'admit ' : 'stop ') + host.name,
                'admission-result');
  }

  function drawAdmission() {
    const list = byId('admission-list');
    if (!state.hosts.length) {
      list.replaceChildren(empty('No host has registered yet.'));
      return;
    }
    list.replaceChildren(html('table', {},
      html('tr', {}, ['Host', 'State', 'Lent', 'Borrowed', 'Pooling', '']
        .map(name => html('th', {}, name))),
      state.hosts.map(host => {
        const button = html('button', {
          class: host.pooling_admitted ? 'reject' : 'approve'},
          host.pooling_admitted ? 'Stop' : 'Admit');
        button.addEventListener('click',
                                () => toggleAdmission(host, button));
        return html('tr', {class: 'admission', 'data-uuid': host.uuid,
                           'data-admitted': String(host.pooling_admitted)},
          html('td', {class: 'host', title: host.name},
               fitted(host.name, LABEL_CHARS)),
          html('td', {}, host.state),
          html('td', {}, bytes(host.lent_bytes)),
          html('td', {}, bytes(host.borrowed_bytes)),
          html('td', {}, host.pooling_admitted ? stateBadge('admitted')
            : html('span', {class: 'state state-not-admitted'},
                   'not admitted')),
          html('td', {class: 'actions'}, button));
      })));
  }

  // -- Memory servers ----------------------------------------------------

  // A host's agent registers its memory server disabled: it lends
  // nothing until an operator enables it here.
  function toggleServer(server, button) {
    const what = 'the memory server of ' + server.host_name + ' ('
      + server.address + ')';
    const enable = !server.enabled;
    return flip(button, apiPath('memory_servers', server.uuid),
                {enabled: enable},
                (enable ? 'Enabled ' : 'Disabled ') + what + '.',
                'Could not ' + (enable ? 'enable ' : 'disable ') + what,
                'server-result');
  }

  function drawServers() {
    const list = byId('server-list');
    if (!state.servers.length) {
      list.replaceChildren(empty('No host has registered a memory server.'));
      return;
    }
    list.replaceChildren(html('table', {},
      html('tr', {}, ['Host', 'Address', 'Capacity', 'Lent', 'Leases',
                      'Lending', ''].map(name => html('th', {}, name))),
      state.servers.map(server => {
        const button = html('button', {
          class: server.enabled ? 'reject' : 'approve'},
          server.enabled ? 'Disable' : 'Enable');
        button.addEventListener('click', () => toggleServer(server, button));
        return html('tr', {class: 'server', 'data-uuid': server.uuid,
                           'data-enabled': String(server.enabled)},
          html('td', {class: 'host', title: server.host_name},
               fitted(server.host_name, LABEL_CHARS)),
          html('td', {class: 'mono'}, server.address),
          html('td', {}, bytes(server.capacity_bytes)),
          html('td', {}, bytes(server.lent_bytes)),
          html('td', {}, server.leases.length),
          html('td', {}, stateBadge(server.enabled ? 'enabled'
                                                   : 'disabled')),
          html('td', {class: 'actions'}, button));
      })));
  }

  // -- Decisions ---------------------------------------------------------

  // What a decision is predicted to do, one line per change.
  function effect(decision) {
    const out = decision.outputs || {};
    if (decision.kind === 'memory_targets') {
      const lines = [];
      for (const [uuid, vm] of Object.entries(out.instances || {})) {
        const now = instance(uuid) ? memoryOf(instance(uuid)) : null;
        if (vm.target_bytes === now) continue;
        lines.push(vmLabel(uuid) + ': ' + bytes(now) + ' → '
                   + bytes(vm.target_bytes) + change(now, vm.target_bytes)
                   + ', miss ratio '
                   + ratio(vm.predicted_miss_ratio)
                   + (vm.guardrails && vm.guardrails.length
                     ? ' (held by ' + vm.guardrails.join(', ') + ')' : ''));
      }
      if (out.policy && out.policy.geometric_mean !== undefined) {
        lines.push('relative miss ratios, geometric mean '
                   + ratio(out.policy.geometric_mean));
      }
      return lines;
    }
    if (decision.kind === 'migration' && out.move) {
      const move = out.move;
      return [vmLabel(move.vm) + ': ' + hostName(move.source) + ' → '
              + hostName(move.destination) + ', relieves '
              + bytes(move.gain_bytes),
              'utilization after: ' + percent(move.source_utilization)
              + ' / ' + percent(move.destination_utilization)];
    }
    if (decision.kind === 'allocation_ratio') {
      return ['MEMORY_MB allocation ratio → ' + out.allocation_ratio];
    }
    if (decision.kind === 'pooling' && out.paging) {
      const paging = out.paging;
      return [vmLabel(paging.vm) + ': resident '
              + bytes(paging.previous_resident_bytes) + ' → '
              + bytes(paging.resident_bytes)
              + change(paging.previous_resident_bytes, paging.resident_bytes)
              + (paging.lender ? ', ' + bytes(paging.lent_bytes)
                 + ' lent by ' + hostName(paging.lender) : ''),
              'host utilization after ' + percent(
                paging.host_utilization_after) + ', relative miss ratio '
              + ratio(paging.relative_miss_ratio)];
    }
    return [JSON.stringify(out).slice(0, 200)];
  }

  // What an operator's request did, above the list it was made from.
  function showResult(text, kind, where) {
    const result = byId(where || 'decision-result');
    result.textContent = text;
    result.className = 'result ' + kind;
    result.hidden = false;
  }

  async function transition(decision, request, buttons) {
    buttons.forEach(button => { button.disabled = true; });
    const what = decision.kind + ' decision ' + shortId(decision.uuid)
      + ' of ' + hostName(decision.host_uuid);
    try {
      const done = await api(apiPath('decisions', decision.uuid, request),
                             'POST');
      showResult((request === 'approve' ? 'Approved ' : 'Rejected ')
                 + what + ': it is now ' + done.state + '.', 'ok');
    } catch (error) {
      showResult('Could not ' + request + ' ' + what + ': '
                 + error.message, 'error');
    }
    await refresh();
  }

  function stateBadge(value) {
    return html('span', {class: 'state state-' + value}, value);
  }

  function drawDecisions() {
    const list = byId('decision-list');
    if (!state.pending.length) {
      list.replaceChildren(empty('No decision waits for an operator.'));
    } else {
      const rows = state.pending.map(decision => {
        const approve = html('button', {class: 'approve'}, 'Approve');
        const reject = html('button', {class: 'reject'}, 'Reject');
        approve.addEventListener('click', () => transition(
          decision, 'approve', [approve, reject]));
        reject.addEventListener('click', () => transition(
          decision, 'reject', [approve, reject]));
        return html('tr', {class: 'decision', 'data-uuid': decision.uuid},
          html('td', {},
               html('strong', {}, decision.kind), html('br'),
               html('span', {class: 'mono'}, shortId(decision.uuid)),
               ' · ' + decision.policy + ' · '
               + utcTime(decision.created_at)),
          html('td', {class: 'host'}, hostName(decision.host_uuid)
               + (decision.peer_host_uuid
                 ? ' → ' + hostName(decision.peer_host_uuid) : '')),
          html('td', {}, html('ul', {class: 'effect'},
                              effect(decision).map(l => html('li', {}, l)))),
          html('td', {class: 'actions'}, approve, reject));
      });
      list.replaceChildren(html('table', {},
        html('tr', {}, ['Decision', 'Host', 'Predicted effect', ''].map(
          name => html('th', {}, name))),
        rows));
    }
    const recent = byId('recent-list');
    if (!state.recent.length) {
      recent.replaceChildren(empty('No decision yet.'));
      return;
    }
    recent.replaceChildren(html('table', {},
      html('tr', {}, ['When (UTC)', 'Decision', 'Kind', 'Host', 'State'].map(
        name => html('th', {}, name))),
      state.recent.map(decision => html(
        'tr', {class: 'recent', 'data-uuid': decision.uuid,
               'data-state': decision.state},
        html('td', {}, utcTime(decision.updated_at || decision.created_at)),
        html('td', {class: 'mono'}, shortId(decision.uuid)),
        html('td', {}, decision.kind),
        html('td', {}, hostName(decision.host_uuid)),
        html('td', {}, stateBadge(decision.state))))));
  }

  // -- The selected VM ---------------------------------------------------

  function drawSelect() {
    const vms = state.instances.slice().sort((a, b) =>
      hostName(a.host_uuid).localeCompare(hostName(b.host_uuid))
      || a.uuid.localeCompare(b.uuid));
    // Unless the operator chose one, the first a decision waits to
    // resize, else the first.
    if (!vms.some(vm => vm.uuid === state.selected)) {
      const waiting = vms.find(vm => pendingTarget(vm.uuid) !== null);
      state.selected = (waiting || vms[0] || {uuid: null}).uuid;
    }
    const options = vms.map(vm => [vm.uuid, vmLabel(vm.uuid) + ' on '
      + hostName(vm.host_uuid) + ', ' + bytes(memoryOf(vm))]);
    const key = JSON.stringify(options);
    // Rebuilt only when it changed, so an open list is not snatched away.
    if (vmSelect.dataset.key !== key) {
      vmSelect.replaceChildren(...options.map(([value, label]) =>
        html('option', {value: value}, label)));
      vmSelect.dataset.key = key;
    }
    vmSelect.value = state.selected || '';
  }

  // The size a pending decision would give the VM, or null.
  function pendingTarget(uuid) {
    for (const decision of state.pending) {
      const out = decision.outputs || {};
      if (decision.kind === 'memory_targets' && out.instances
          && out.instances[uuid]) {
        const target = out.instances[uuid].target_bytes;
        const vm = instance(uuid);
        if (vm && target !== memoryOf(vm)) return target;
      } else if (decision.kind === 'pooling' && out.paging
                 && out.paging.vm === uuid) {
        return out.paging.resident_bytes;
      } else if (decision.kind === 'migration' && out.move
                 && out.move.vm === uuid) {
        return out.move.destination_memory_bytes;
      }
    }
    return null;
  }

  /* The 95 % interval of estimator ``name``'s working sets over
   * ``reports`` (oldest first), {low, high}, or null when none of them
   * was sampled; a report without one adds its estimate to both. */
  function wssBand(reports, name) {
    const measured = reports.filter(r => r.wss[name] !== undefined);
    if (!measured.some(r => (r.wss_bounds || {})[name])) return null;
    const at = (r, index) => [Date.parse(r.collected_at),
      ((r.wss_bounds || {})[name] || [r.wss[name], r.wss[name]])[index]];
    return {low: measured.map(r => at(r, 0)),
            high: measured.map(r => at(r, 1))};
  }

  function drawWss(vm) {
    const target = byId('wss-chart');
    const reports = state.reports.slice().reverse();
    if (!reports.length) {
      target.replaceChildren(empty('No report of this VM yet.'));
      return;
    }
    const estimators = [...new Set(reports.flatMap(
      r => Object.keys(r.wss)))].sort();
    const series = estimators.map(name => ({
      name: name,
      points: reports.filter(r => r.wss[name] !== undefined).map(
        r => [Date.parse(r.collected_at), r.wss[name]]),
      band: wssBand(reports, name),
    }));
    const memory = memoryOf(vm);
    const highest = Math.max(memory, ...series.flatMap(
      s => s.points.concat(s.band ? s.band.high : []).map(p => p[1])));
    const times = reports.map(r => Date.parse(r.collected_at));
    target.replaceChildren(lineChart({
      title: 'working-set size of ' + vm.uuid, vm: vm.uuid,
      series: series,
      x: timeAxis(Math.min(...times), Math.max(...times)),
      y: bytesAxis(highest * 1.1),
      horizontals: [{at: memory, kind: 'memory-line',
                     label: 'memory ' + bytes(memory)}],
    }));
  }

  function drawMrc(vm) {
    const target = byId('mrc-chart');
    const latest = state.reports[0];
    const curves = latest ? Object.entries(latest.mrc).sort() : [];
    if (!curves.length) {
      target.replaceChildren(empty('No miss-ratio curve for this VM yet.'));
      return;
    }
    const memory = memoryOf(vm);
    const verticals = [{at: memory, kind: 'marker-current',
                        label: 'memory ' + bytes(memory)}];
    if (vm.resident_target_bytes !== null
        && vm.resident_target_bytes !== undefined) {
      verticals.push({at: vm.resident_target_bytes, kind: 'marker-resident',
                      label: 'resident ' + bytes(vm.resident_target_bytes)});
    }
    const pending = pendingTarget(vm.uuid);
    if (pending !== null) {
      verticals.push({at: pending, kind: 'marker-pending',
                      label: 'pending ' + bytes(pending)});
    }
    const bands = latest.mrc_bands || {};
    const points = curves.flatMap(([method, curve]) => curve.concat(
      bands[method] ? bands[method].high : []));
    const widest = Math.max(...points.map(p => p[0]),
                            ...verticals.map(v => v.at));
    const highest = Math.min(1, Math.max(0.05, ...points.map(p => p[1]))
                                * 1.1);
    target.replaceChildren(lineChart({
      title: 'miss-ratio curve of ' + vm.uuid, vm: vm.uuid,
      series: curves.map(([method, curve]) => ({
        name: method, points: curve, band: bands[method] || null})),
      x: bytesAxis(widest * 1.05),
      y: {lo: 0, hi: highest, ticks: ticks(0, highest, 5),
          format: v => +v.toFixed(3) + ''},
      verticals: verticals,
    }));
  }

  async function loadVm() {
    const vm = instance(state.selected);
    if (!vm) {
      state.reports = [];
      byId('wss-chart').replaceChildren(empty('No VM to show.'));
      byId('mrc-chart').replaceChildren();
      return;
    }
    const page = await api(apiPath('instances', vm.uuid, 'reports')
                           + '?limit=' + REPORTS);
    state.reports = page.reports;
    drawWss(vm);
    drawMrc(vm);
  }

  // -- Refreshing --------------------------------------------------------

  function setStatus(text) {
    const status = byId('status');
    status.textContent = text;
    status.className = 'status';
    byId('problem').hidden = true;
    tokenInput.classList.remove('needed');
  }

  // A failure in the header and, as it may leave the page stale or
  // empty, in a banner across it; a refused token asks for another.
  function showProblem(error) {
    const unauthorized = error.status === 401;
    const text = unauthorized
      ? 'The API refused the token: ' + error.message + ' Enter a valid '
        + 'token in the Token field: with keystone, a project-scoped admin '
        + 'token (openstack token issue -f value -c id).'
      : 'Could not read the API: ' + error.message;
    const status = byId('status');
    status.textContent = unauthorized ? 'token refused' : 'error';
    status.className = 'status error';
    const problem = byId('problem');
    problem.textContent = text;
    problem.dataset.status = error.status === undefined ? ''
      : String(error.status);
    problem.hidden = false;
    tokenInput.classList.toggle('needed', unauthorized);
  }

  let refreshing = null;

  // One refresh at a time; a second call waits for the running one.
  function refresh() {
    if (!refreshing) {
      refreshing = load().finally(() => { refreshing = null; });
    }
    return refreshing;
  }

  async function load() {
    try {
      const [hosts, instances, servers, pending, recent] = await Promise.all([
        api('/hosts'), api('/instances'), api('/memory_servers'),
        api('/decisions?state=recommended'),
        api('/decisions?limit=' + RECENT)]);
      state.hosts = hosts.hosts;
      state.instances = instances.instances;
      state.servers = servers.memory_servers;
      state.pending = pending.decisions;
      state.recent = recent.decisions;
      drawHosts();
      drawAdmission();
      drawServers();
      drawDecisions();
      drawSelect();
      await loadVm();
      setStatus('updated ' + new Date().toISOString().slice(11, 19)
                + ' UTC · ' + state.hosts.length + ' hosts · '
                + state.instances.length + ' VMs · '
                + state.pending.length + ' pending');
    } catch (error) {
      showProblem(error);
    }
  }

  tokenInput.addEventListener('change', () => {
    sessionStorage.setItem('memcanal.token', tokenInput.value);
    refresh();
  });
  vmSelect.addEventListener('change', () => {
    state.selected = vmSelect.value;
    sessionStorage.setItem('memcanal.vm', state.selected);
    loadVm().catch(showProblem);
  });
  refresh();
  setInterval(refresh, REFRESH_MS);
})();
