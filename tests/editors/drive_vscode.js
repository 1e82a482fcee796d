'use strict';
// Drives the dLLM Infill extension in code-server (VS Code 1.100 in a browser) with headless
// chromium through puppeteer-core; test_vscode.py starts code-server and runs this as
//   NODE_PATH=build/vscode-e2e/node_modules node tests/editors/drive_vscode.js
// Environment: DLLM_SCENARIO (full, the default: every step on sample.py with the builtin
// model; fim: the ghost text at line 2 of add.py from a FIM API, and its accept),
// DLLM_URL (code-server's address with ?folder=), DLLM_FILE (the workspace's
// file, read back from disk after each edit), DLLM_SETTINGS (the user settings.json),
// DLLM_RESULT (JSON lines are appended there), DLLM_SCREENS (a folder for screenshots),
// DLLM_PROFILE (chromium's throwaway profile), DLLM_T0 (the wall time code-server was launched
// at, in seconds), DLLM_CHROMIUM (default /usr/bin/chromium). Each step writes one
// {"step": ..., "ok": bool, "t": seconds since launch, ...} line; the last is {"step": "done"}.

const fs = require('fs');
const {
  env,
  STATUS_ITEM,
  sleep,
  readFile,
  emit,
  screenshot,
  until,
  chord,
  quickInputRows,
  quickInputOpen,
  runCommand,
  goTo,
  toasts,
  openFile,
  main,
} = require('./vscode_common');

const SETTINGS = env('DLLM_SETTINGS');

/** Opens the command palette with `text` typed; the rows it lists. */
async function palette(page, text) {
  await page.keyboard.press('F1');
  await quickInputOpen(page);
  await page.keyboard.type(text);
  await sleep(300);
  return quickInputRows(page);
}

/** The status bar item of the extension: its aria-label (text and tooltip) and its icon. */
function statusItem(page) {
  return page.evaluate((id) => {
    const item = document.getElementById(id);
    if (!item) {
      return undefined;
    }
    const icon = item.querySelector('.codicon');
    const label = item.querySelector('[aria-label]') || item;
    return {
      label: label.getAttribute('aria-label') || '',
      text: item.textContent.trim(),
      icon: icon ? [...icon.classList].find((c) => c.startsWith('codicon-') && c !== 'codicon-modifier-spin') : null,
    };
  }, STATUS_ITEM);
}

/** The inline suggestion on screen: the text of VS Code's ghost-text decorations, or ''. */
function ghostText(page) {
  return page.evaluate(() => {
    const inline = [...document.querySelectorAll('.monaco-editor .ghost-text-decoration')]
      .map((e) => e.textContent)
      .join('');
    // Lines after the first are drawn in a view zone: .suggest-preview-text .view-line, whose
    // spans are of class ghost-text.
    const more = [
      ...document.querySelectorAll('.monaco-editor .suggest-preview-text .view-line'),
    ].map((e) => e.textContent);
    return [inline, ...more].join('\n').replace(/\u00a0/g, ' ');
  });
}

/** The lines the editor shows, top to bottom (ghost text included). */
function editorLines(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll('.monaco-editor .view-line')]
      .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
      .map((e) => e.textContent.replace(/\u00a0/g, ' '))
  );
}

/** Saves the active editor (Ctrl+S) until the file on disk differs from `before`. */
async function saveUntilChanged(page, before, timeoutMs) {
  return until(
    timeoutMs,
    async () => {
      const text = readFile();
      if (text !== before) {
        return text;
      }
      const dirty = await page.$('.tabs-container .tab.active.dirty');
      if (dirty) {
        await chord(page, ['Control'], 's');
      }
      return undefined;
    },
    500
  );
}

/** The workbench, FILE opened with Quick Open, the extension's item ready (the steps
 * workbench, open, status_item and ready); false when the item did not turn ready. */
async function openReady(page) {
  await openFile(page);

  // The status bar item: shown at once (starting or loading), then ready with a check mark.
  const first = await until(60000, () => statusItem(page));
  emit({ step: 'status_item', ok: first !== undefined, item: first });
  if (!first) {
    return false;
  }
  const ready = await until(240000, async () => {
    const item = await statusItem(page);
    return item && (item.icon === 'codicon-check' || item.icon === 'codicon-error') && item;
  });
  emit({ step: 'ready', ok: ready !== undefined && ready.icon === 'codicon-check', item: ready });
  return ready !== undefined && ready.icon === 'codicon-check';
}

/** A FIM API's answer at line 2 of add.py (`    return`, the space typed): the ghost text is
 * what our finish made of it; Tab inserts it. */
async function runFim(page) {
  if (!(await openReady(page))) {
    return;
  }
  const before = readFile();
  await goTo(page, '2');
  await page.keyboard.press('End');
  const typed = Date.now();
  await page.keyboard.type(' ');
  const ghost = await until(
    60000,
    async () => {
      const text = await ghostText(page);
      return text.trim() !== '' && text;
    },
    100
  );
  emit({
    step: 'ghost',
    ok: ghost !== undefined,
    text: ghost,
    after_typing_s: (Date.now() - typed) / 1000,
    screenshot: await screenshot(page, ghost ? 'vscode-fim-ghost.png' : 'vscode-fim-no-ghost.png'),
  });
  if (!ghost) {
    return;
  }
  await page.keyboard.press('Tab');
  const accepted = await saveUntilChanged(page, before, 15000);
  emit({
    step: 'accept',
    ok: accepted !== undefined,
    line2: accepted && accepted.split('\n')[1],
    text: accepted,
    ghost_gone: (await ghostText(page)).trim() === '',
  });
}

/** Every step on sample.py with the builtin model. */
async function runFull(page) {
  if (!(await openReady(page))) {
    return;
  }

  // Drops what a step typed: File: Revert File, back to the text on disk, and clean.
  const undoAll = async () => {
    await page.keyboard.press('Escape');
    await runCommand(page, 'File: Revert File');
    await until(5000, async () => !(await page.$('.tabs-container .tab.active.dirty')));
  };

  // Ghost text at the blank line inside mean()'s body, after typed indentation.
  let before = readFile();
  const lines = before.split('\n');
  if (lines[2] !== '') {
    throw new Error('fixture: line 3 of sample.py should be blank');
  }
  await goTo(page, '3');
  const typed = Date.now();
  await page.keyboard.type('    ');
  const ghost = await until(
    Number(process.env.DLLM_GHOST_WAIT || 120) * 1000,
    async () => {
      const text = await ghostText(page);
      return text.trim() !== '' && text;
    },
    100
  );
  const ghostShot = ghost ? await screenshot(page, 'vscode-ghost.png') : undefined;
  emit({
    step: 'ghost',
    ok: ghost !== undefined,
    text: ghost,
    after_typing_s: (Date.now() - typed) / 1000,
    screenshot: ghostShot,
  });
  if (!ghost) {
    await screenshot(page, 'vscode-no-ghost.png');
    return;
  }

  // Tab accepts; the document (saved, read back from disk) has the ghost's text at the cursor.
  const shown = (await ghostText(page)) || ghost; // as it is now, should a newer one have come
  await page.keyboard.press('Tab');
  const accepted = await saveUntilChanged(page, before, 15000);
  const firstLine = shown.split('\n')[0];
  const after = accepted ? accepted.split('\n') : [];
  emit({
    step: 'accept',
    ok:
      accepted !== undefined &&
      after.slice(0, 2).join('\n') === lines.slice(0, 2).join('\n') &&
      after[2].startsWith('    ' + firstLine) &&
      after.slice(-lines.length + 3).join('\n') === lines.slice(3).join('\n'),
    line3: after[2],
    ghost_line: firstLine,
    ghost_gone: (await ghostText(page)).trim() === '',
  });
  await page.keyboard.press('Escape');

  // Ctrl+Right takes the next word of a suggestion of two words or more: VS Code reports a
  // partial accept. The first try is sure to get one: a new function at the end of the
  // document that begins as mean() does (`total = 0`, then `return `), where the draft of
  // mean()'s last line, `total / len(values)`, passes the gate (confidence about 0.41 against
  // 0.3) and goes before the model's fill; every name it reads is bound in the new function or
  // typed (drafts/strangers.py drops it in a function without `total`). The builtin model's
  // own fills after the other heads are short, often one word or none, so they are tries after
  // it. Each line of a try goes on a new line with its indentation typed: Shift+Home first
  // selects what VS Code indented after Enter, which is not always the same (its indentation
  // rules read the tokens, which come late on a loaded machine: then the line stays flush,
  // the function has no body, and nothing is drafted).
  const splits = (text) => /^[ \t]*(\w+\W|[^\w\s]+[\w\s])/.test(text);
  const revert = async () => {
    await page.keyboard.press('Escape');
    // back to the text on disk (the Tab above); test_vscode.py turns code-server's autosave off
    await runCommand(page, 'File: Revert File');
    return until(5000, async () => !(await page.$('.tabs-container .tab.active.dirty')));
  };
  let part;
  const tries = [];
  for (const typed of [
    ['def average(values):', '    total = 0', '    return '],
    ['result = ['],
    ['for i in range('],
    ['x = '],
  ]) {
    await chord(page, ['Control'], 'End'); // the end of the document
    for (const line of typed) {
      await page.keyboard.press('Enter');
      await chord(page, ['Shift'], 'Home'); // the indentation VS Code gave, if any
      await page.keyboard.type(line);
    }
    const head = typed.join('\n');
    let last = '';
    const text = await until(20000, async () => {
      last = await ghostText(page);
      return splits(last) && last;
    });
    if (text) {
      await chord(page, ['Control'], 'ArrowRight');
      const taken = await until(5000, async () => {
        const rest = await ghostText(page);
        return rest !== text && rest;
      });
      part = { head, ghost: text, rest: taken };
    }
    // the editor's lines (ghost text included) where no ghost text would do, for the record
    const lines = text ? undefined : await editorLines(page);
    const reverted = (await revert()) !== undefined;
    tries.push({ head, ghost: text || last, reverted, lines });
    if (part || !reverted) {
      break; // a try after a failed revert would type into the last one's text
    }
  }
  emit({ step: 'partial', ok: part !== undefined && part.rest !== undefined, ...part, tries });

  // The counts, read back through dllm/status (Show Status): the Tab above accepted one item
  // whole, Ctrl+Right a part of another; each counted once.
  await runCommand(page, 'dLLM: Show Status');
  const countsLine = await until(15000, async () =>
    (await toasts(page)).find((m) => m.startsWith('dLLM: ') && m.includes(' shown'))
  );
  const count = (name) => Number(((countsLine || '').match(new RegExp(`(\\d+) ${name}`)) || [])[1]);
  emit({
    step: 'counts',
    ok:
      countsLine !== undefined &&
      count('accepted') === 1 &&
      count('partial') === 1 &&
      count('shown') >= 2,
    line: countsLine,
  });

  // The palette lists the extension's commands.
  const rows = await palette(page, 'dLLM');
  await page.keyboard.press('Escape');
  const titles = [
    'dLLM: Fill function body',
    'dLLM: Regenerate selection',
    'dLLM: Refine selection',
    'dLLM: Snooze suggestions',
    'dLLM: Show Status',
  ];
  emit({
    step: 'commands',
    ok: titles.every((title) => rows.some((row) => row.startsWith(title))),
    rows,
  });

  // dLLM: Fill function body with the cursor in clamp()'s body, which is code (`return value`):
  // the edit needs confirmation, so VS Code opens the refactor preview and the document stays
  // as it is until Apply Refactoring; then the server's edit lands.
  before = readFile();
  const defLine = before.split('\n').findIndex((l) => l.startsWith('def clamp')) + 1;
  await goTo(page, `${defLine + 2}:5`);
  await runCommand(page, 'dLLM: Fill function body');
  const preview = await until(120000, () =>
    page.evaluate(() => /refactor preview/i.test(document.body.innerText))
  );
  await sleep(1000);
  const previewShot = await screenshot(page, 'vscode-fill-preview.png');
  const dirty = await page.$('.tabs-container .tab.dirty[aria-label*="sample.py"]');
  const unchanged = readFile() === before && !dirty;
  emit({
    step: 'fill_asks',
    ok: preview !== undefined && unchanged,
    preview: preview !== undefined,
    unchanged,
    toasts: await toasts(page),
    screenshot: previewShot,
  });
  // The preview lists the change unchecked (it needs confirmation): check it, then Apply.
  // The visible checkboxes of the preview's rows (the file, then its change), by position.
  const boxes = () =>
    page.evaluate(() =>
      [...document.querySelectorAll('.part.panel .monaco-list-row')]
        .map((row) => row.querySelector('.monaco-checkbox, [role="checkbox"]'))
        .filter((b) => b && b.getBoundingClientRect().width > 0)
        .map((b) => {
          const r = b.getBoundingClientRect();
          const on = b.getAttribute('aria-checked') === 'true' || b.classList.contains('checked');
          return { x: r.x + r.width / 2, y: r.y + r.height / 2, on };
        })
    );
  const listed = await boxes();
  if (listed.length > 0 && !listed[0].on) {
    await page.mouse.click(listed[0].x, listed[0].y); // the file's box checks its changes
    await sleep(500);
  }
  for (const b of (await boxes()).filter((box) => !box.on)) {
    await page.mouse.click(b.x, b.y);
    await sleep(300);
  }
  const checked = (await boxes()).map((b) => b.on);
  const buttons = await page.$$('.part.panel .monaco-button');
  let apply;
  for (const b of buttons) {
    if ((await b.evaluate((e) => e.textContent.trim())) === 'Apply') {
      apply = b;
    }
  }
  if (!apply) {
    throw new Error('the refactor preview has no Apply button');
  }
  await apply.click();
  const closed = await until(10000, () =>
    page.evaluate(() => !/refactor preview/i.test(document.body.innerText))
  );
  await screenshot(page, 'vscode-fill-applied.png');
  emit({ step: 'fill_confirm', ok: true, checked, preview_closed: closed !== undefined });
  await goTo(page, `${defLine}`); // back in sample.py's editor, for saving
  const filled = await saveUntilChanged(page, before, 120000);
  const fillShot = await screenshot(page, 'vscode-fill.png');
  const beforeLines = before.split('\n');
  const filledLines = filled ? filled.split('\n') : [];
  emit({
    step: 'fill',
    ok:
      filled !== undefined &&
      filledLines.slice(0, defLine + 1).join('\n') === beforeLines.slice(0, defLine + 1).join('\n'),
    body: filledLines.slice(defLine + 1).join('\n'),
    toasts: await toasts(page),
    screenshot: fillShot,
  });

  // dLLM: Show Status: one line in a notification.
  await runCommand(page, 'dLLM: Show Status');
  const statusLine = await until(15000, async () =>
    (await toasts(page)).find((m) => m.startsWith('dLLM: '))
  );
  emit({
    step: 'show_status',
    ok: statusLine !== undefined && statusLine.startsWith('dLLM: ready'),
    line: statusLine,
  });

  // No ghost text in a comment, none while snoozed (the last steps on the document: the text
  // typed here stays unsaved).
  const quietMs = Number(process.env.DLLM_QUIET_WAIT || 8) * 1000;
  const noGhostFor = async (ms) =>
    (await until(ms, async () => (await ghostText(page)).trim())) === undefined;
  await goTo(page, '2');
  await page.keyboard.press('End');
  await page.keyboard.press('Enter');
  await page.keyboard.type('# the mean of an empty list is an error ');
  const commentQuiet = await noGhostFor(quietMs);
  const commentGhost = await ghostText(page);
  await page.keyboard.press('Escape');
  emit({ step: 'comment', ok: commentQuiet, ghost: commentGhost });

  // dLLM: Snooze suggestions (5 minutes): no ghost text at a fresh line of mean()'s body, where
  // the ghost step had some; 0 turns suggestions back on.
  const snoozeTo = async (minutes, expect) => {
    await runCommand(page, 'dLLM: Snooze suggestions');
    await quickInputOpen(page);
    await chord(page, ['Control'], 'a');
    await page.keyboard.type(String(minutes));
    await page.keyboard.press('Enter');
    return until(15000, async () => (await toasts(page)).find((m) => m.includes(expect)));
  };
  const snoozed = await snoozeTo(5, 'snoozed for 5 min');
  await goTo(page, '2');
  await page.keyboard.press('End');
  await page.keyboard.press('Enter');
  const snoozeQuiet = await noGhostFor(quietMs);
  await page.keyboard.press('Escape');
  const woken = await snoozeTo(0, 'back on');
  emit({
    step: 'snooze',
    ok: snoozed !== undefined && snoozeQuiet && woken !== undefined,
    snoozed,
    quiet: snoozeQuiet,
    woken,
  });

  // A dllm.serverPath that resolves to nothing, typed into the Settings editor: the server
  // restarts, and the restart says that the command is missing and the item turns red.
  // (code-server does not notice settings.json written behind its back.)
  const bad = '/nonexistent/dllm-infill-ls';
  const earlier = await toasts(page);
  await runCommand(page, 'Preferences: Open User Settings');
  await page.waitForSelector('.settings-editor .suggest-input-container', { timeout: 30000 });
  await page.keyboard.type('dllm.serverPath');
  const input = '.settings-editor .setting-item-text input';
  await until(15000, () =>
    page.$$eval(input, (els) => els.length === 1 && els[0].value.includes('dllm-infill-ls'))
  );
  await page.click(input);
  await chord(page, ['Control'], 'a');
  await page.keyboard.type(bad);
  const written = await until(15000, () => {
    try {
      return JSON.parse(fs.readFileSync(SETTINGS, 'utf8'))['dllm.serverPath'] === bad;
    } catch {
      return false; // being written
    }
  });
  const missing = await until(30000, async () =>
    (await toasts(page)).find((m) => m.includes(bad))
  );
  const failed = await until(10000, async () => {
    const item = await statusItem(page);
    return item && item.icon === 'codicon-error' && item;
  });
  await sleep(2000); // the status poll of the old client (every second while it ran) is stopped
  const item = await statusItem(page);
  // Nothing else went wrong on the way (such as a settings notification to the stopping client).
  const others = (await toasts(page)).filter((m) => m !== missing && !earlier.includes(m));
  const missingShot = await screenshot(page, 'vscode-missing-server.png');
  emit({
    step: 'missing_server',
    ok:
      written !== undefined &&
      missing !== undefined &&
      missing.includes('not found') &&
      failed !== undefined &&
      item.label.includes(`"${bad}" not found`) &&
      others.length === 0,
    settings_written: written !== undefined,
    message: missing,
    item,
    other_messages: others,
    screenshot: missingShot,
  });
}

main({ full: runFull, fim: runFim }, 'full', 'vscode-error.png');
