'use strict';
// The extension's pure parts: no `vscode` import, so `npm test` runs them under plain Node.

const fs = require('fs');
const path = require('path');

/** The document selector for the `dllm.languages` setting (every language, `*`, when empty or
 * invalid: VS Code's filters match any language to `*`). */
function documentSelector(languages) {
  const ids = Array.isArray(languages) && languages.length > 0 ? languages : ['*'];
  return ids.flatMap((language) => [
    { scheme: 'file', language },
    { scheme: 'untitled', language },
  ]);
}

/** A copy of the settings without the keys only the client reads. */
function withoutKeys(settings, keys) {
  const out = JSON.parse(JSON.stringify(settings || {}));
  for (const key of keys) {
    delete out[key];
  }
  return out;
}

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Where `command` resolves: an absolute or relative path as given, or the first match on PATH
 * (with PATHEXT on Windows). undefined when nothing executable is found.
 */
function findExecutable(command, env = process.env, platform = process.platform) {
  if (!command) {
    return undefined;
  }
  if (command.includes('/') || command.includes('\\')) {
    return isExecutable(command) ? command : undefined;
  }
  const exts = platform === 'win32' ? (env.PATHEXT || '.EXE;.CMD;.BAT').split(';') : [''];
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    for (const ext of exts) {
      const file = path.join(dir || '.', command + ext);
      if (isExecutable(file)) {
        return file;
      }
    }
  }
  return undefined;
}

/**
 * An inline completion item as the server sent it, for the reports that name it: its text and
 * its accept command (whose arguments carry the item's id); undefined without that command.
 */
function wireItem(item) {
  const command = item && item.command;
  if (!command || command.command !== 'dllm.accepted' || !Array.isArray(command.arguments)) {
    return undefined;
  }
  const text = typeof item.insertText === 'string' ? item.insertText : (item.insertText || {}).value;
  return {
    insertText: text,
    command: { title: command.title, command: command.command, arguments: command.arguments },
  };
}

/** The accepted length VS Code reports: a number, or {kind, acceptedLength}; 0 if neither. */
function acceptedLength(info) {
  const n = typeof info === 'number' ? info : info && info.acceptedLength;
  return Number.isInteger(n) && n > 0 ? n : 0;
}

/**
 * The counts and the backend's health of a `dllm/status` result, as parts of a line:
 * ['3 shown', '1 accepted (33%)', '1 partial', 'p50 420 ms', 'slow: median ...'].
 */
function statsParts(status) {
  const parts = [];
  const stats = (status && status.stats) || {};
  const total = stats.total;
  if (stats.enabled === false) {
    parts.push('counting off');
  } else if (total) {
    const rate = total.acceptance_rate == null ? '' : ` (${Math.round(100 * total.acceptance_rate)}%)`;
    parts.push(`${total.shown || 0} shown`, `${total.accepted || 0} accepted${rate}`);
    parts.push(`${total.partial || 0} partial`);
    if (total.p50_ms != null) {
      parts.push(`p50 ${Math.round(total.p50_ms)} ms`);
    }
  }
  parts.push(...nextEditParts(status));
  const health = (status && status.health) || {};
  if (health.state === 'slow' || health.state === 'failing') {
    parts.push(`${health.state}: ${health.reason}`);
  }
  return parts;
}

/**
 * The next edits of a `dllm/status` result ({next_edits: {asked, kinds: {rename: {suggested,
 * shown, accepted}, ...}}}, at its top or in its stats) as parts of a line:
 * ['next edits: 2 shown, 1 accepted (rename 1/2)'], each kind's accepted of shown; none before
 * the first suggestion.
 */
function nextEditParts(status) {
  const edits = (status && (status.next_edits || (status.stats || {}).next_edits)) || {};
  const kinds = edits.kinds && typeof edits.kinds === 'object' ? edits.kinds : {};
  const count = (c, name) => (c && Number.isInteger(c[name]) && c[name] > 0 ? c[name] : 0);
  const names = Object.keys(kinds)
    .filter((k) => count(kinds[k], 'suggested') + count(kinds[k], 'shown') > 0)
    .sort();
  if (names.length === 0) {
    return [];
  }
  const shown = names.reduce((n, k) => n + count(kinds[k], 'shown'), 0);
  const accepted = names.reduce((n, k) => n + count(kinds[k], 'accepted'), 0);
  const each = names.map((k) => `${k} ${count(kinds[k], 'accepted')}/${count(kinds[k], 'shown')}`);
  return [`next edits: ${shown} shown, ${accepted} accepted (${each.join(', ')})`];
}

/** The status bar text and tooltip for a `dllm/status` result (or an error string). */
function statusLine(status, error) {
  if (error) {
    return { text: '$(error) dLLM', tooltip: `dLLM: no status (${error})`, state: 'failed' };
  }
  const state = status && status.state;
  if (state === 'ready') {
    const tau = status.model_threshold == null ? '' : ` · τ ${status.model_threshold}`;
    const counts = statsParts(status).map((part) => ` · ${part}`).join('');
    const health = (status.health || {}).state;
    // A slow or failing backend keeps the item's place, with a warning sign instead of the check.
    const icon = health === 'slow' ? '$(watch)' : health === 'failing' ? '$(warning)' : '$(check)';
    return {
      text: `${icon} dLLM`,
      tooltip:
        `dLLM ready: ${status.model} on ${status.device}${tau} · ${status.requests} requests` +
        counts,
      state,
      health,
    };
  }
  if (state === 'failed') {
    return { text: '$(error) dLLM', tooltip: `dLLM: ${status.error || 'the model failed to load'}`, state };
  }
  return { text: '$(loading~spin) dLLM', tooltip: `dLLM: ${state || 'starting'}…`, state: state || 'starting' };
}

/** One line for the "Show Status" command. */
function statusSummary(status) {
  if (!status) {
    return 'dLLM: the server is not running';
  }
  const parts = [`dLLM: ${status.state}`, `${status.model} on ${status.device || '?'}`];
  if (status.model_threshold != null) {
    parts.push(`τ ${status.model_threshold}`);
  }
  parts.push(`${status.requests} requests`, `${status.model_calls} model calls`);
  parts.push(...statsParts(status));
  if (status.error) {
    parts.push(status.error);
  }
  return parts.join(' · ');
}

const isLine = (n) => Number.isInteger(n) && n >= 0;
const isPosition = (p) => !!p && isLine(p.line) && isLine(p.character);

/**
 * The one edit of a `textDocument/copilotInlineEdit` result that applies to the document asked
 * about (`uri` as sent, at `version`): {range, text, command, wire}, with the range as sent
 * (protocol positions) and `wire` the edit itself; undefined when there is none, it names
 * another document or version, or its shape is wrong.
 */
function nextEditOf(result, uri, version) {
  const edits = result && Array.isArray(result.edits) ? result.edits : [];
  const edit = edits[0];
  if (!edit || typeof edit.text !== 'string' || !edit.range) {
    return undefined;
  }
  const { start, end } = edit.range;
  if (!isPosition(start) || !isPosition(end)) {
    return undefined;
  }
  if (start.line > end.line || (start.line === end.line && start.character > end.character)) {
    return undefined;
  }
  const doc = edit.textDocument;
  if (doc && (doc.uri !== uri || (doc.version != null && doc.version !== version))) {
    return undefined;
  }
  const c = edit.command;
  const command =
    c && typeof c.command === 'string' && (c.arguments === undefined || Array.isArray(c.arguments))
      ? { title: c.title, command: c.command, arguments: c.arguments || [] }
      : undefined;
  return { range: { start, end }, text: edit.text, command, wire: edit };
}

const PREVIEW_CHARS = 120;

/** A next edit's new text on one line, as a decoration shows it: line breaks as ⏎, tabs as
 * spaces, at most PREVIEW_CHARS characters. */
function previewText(text) {
  const flat = text.replace(/\r\n|\r|\n/g, '⏎').replace(/\t/g, '    ');
  return flat.length > PREVIEW_CHARS ? flat.slice(0, PREVIEW_CHARS - 1) + '…' : flat;
}

/** The line is one of start..end: an edit there is on the cursor's line. */
function onLines(line, start, end) {
  return start <= line && line <= end;
}

module.exports = {
  documentSelector,
  withoutKeys,
  findExecutable,
  statusLine,
  statusSummary,
  wireItem,
  acceptedLength,
  statsParts,
  nextEditParts,
  nextEditOf,
  previewText,
  onLines,
};
