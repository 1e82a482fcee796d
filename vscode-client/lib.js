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
  const health = (status && status.health) || {};
  if (health.state === 'slow' || health.state === 'failing') {
    parts.push(`${health.state}: ${health.reason}`);
  }
  return parts;
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

module.exports = {
  documentSelector,
  withoutKeys,
  findExecutable,
  statusLine,
  statusSummary,
  wireItem,
  acceptedLength,
  statsParts,
};
