// The history of a cluster or a job as a timeline, newest first, from the
// events API (GET …/computes/{name}/events, …/jobs/{name}/events).
import { h, replace, badge, when, humanize } from './dom.js';

// eventKind colours an event by what it means for the user.
export function eventKind(type) {
  switch (type) {
    case 'NodeReady': case 'ResizeEnded': case 'JobCompleted':
      return 'ok';
    case 'NodeRequested': case 'ResizeStarted': case 'JobPreparing': case 'JobStarting': case 'JobRunning': case 'JobFinalizing':
      return 'busy';
    case 'NodeIdle': case 'NodeLeaving': case 'NodeRemoved': case 'JobQueued': case 'JobNotStarted': case 'JobCancelRequested':
      return 'wait';
    case 'NodeUnusable': case 'NodePreempted': case 'ScaleUpBlocked': case 'ProvisioningFailed': case 'JobFailed': case 'JobCanceled':
      return 'bad';
  }
  return 'plain';
}

// timeline makes the list; render(events) fills it (newest first).
// names, when given, rewrites API field names in the messages in the
// studio's words (maxNodeCount → maximum nodes).
export function timeline(id, label, names = {}) {
  const lower = Object.fromEntries(Object.entries(names).map(([k, v]) => [k, v.toLowerCase()]));
  const list = h('ol', { class: 'timeline events', id, 'aria-label': label, reversed: true });
  let sig = '';
  return {
    el: list,
    render(events, empty) {
      const next = JSON.stringify(events.map((e) => [e.time, e.type, e.node, e.message]));
      if (next === sig) return;
      sig = next;
      if (!events.length) {
        replace(list, h('li', { class: 'muted' }, empty));
        return;
      }
      replace(list, events.map((e) => h('li', { class: 'event', 'data-type': e.type },
        h('time', { datetime: e.time }, when(e.time)), ' ', badge(e.type, eventKind(e.type)),
        e.node ? [' ', h('code', { class: 'node-id' }, e.node)] : null,
        e.attempt ? h('span', { class: 'muted' }, ` attempt ${e.attempt}${(e.nodes || []).length ? ' on ' + e.nodes.join(', ') : ''}`) : null,
        h('span', { class: 'reason' }, ' — ' + humanize(e.message, lower, { asIs: true })))));
    },
  };
}
