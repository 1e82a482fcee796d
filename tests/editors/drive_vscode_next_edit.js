'use strict';
// Drives the extension's next edits (vscode-client/nextEdit.js) in code-server with headless
// chromium through puppeteer-core; test_vscode_next_edit.py runs it through code_server.py's
// `drive`, with the environment drive_vscode.js gets (DLLM_URL, DLLM_FILE, DLLM_RESULT,
// DLLM_SCREENS, DLLM_PROFILE, DLLM_T0, DLLM_CHROMIUM). DLLM_FILE holds
//   def area(w, h):
//       return w * h
// The steps, one JSON line each ({"step", "ok", "t", ...}), the last {"step": "done"}:
//   preview   `w` renamed `width` by typing: a marker at line 2, the change previewed there
//             (the `w` struck through, `width` after it), a hint at the cursor's line
//   jump      Tab: the cursor on line 2, the document as typed, the edit now inline
//   apply     Tab: the document has `return width * h`, nothing drawn any more
//   counts    dLLM: Show Status: one next edit of kind rename accepted
//   dismiss   `h` renamed `height`: a preview again; Esc: gone, and the document as typed
// DLLM_SCENARIO next-edit-off (dllm.nextEdits.enabled false), one step:
//   off       `w` renamed `width`: nothing drawn for DLLM_QUIET_WAIT s (8), none counted

const {
  STATUS_ITEM,
  sleep,
  readFile,
  emit,
  screenshot: shoot,
  until,
  chord,
  runCommand,
  goTo,
  toasts,
  openFile,
  main,
} = require('./vscode_common');

const WAIT_MS = Number(process.env.DLLM_NEXT_EDIT_WAIT || 60) * 1000;
const QUIET_MS = Number(process.env.DLLM_QUIET_WAIT || 8) * 1000;

const screenshot = (page, name) => shoot(page, `vscode-next-edit-${name}.png`);

function statusIcon(page) {
  return page.evaluate((id) => {
    const item = document.getElementById(id);
    const icon = item && item.querySelector('.codicon');
    const names = icon ? [...icon.classList] : [];
    return names.find((c) => c.startsWith('codicon-') && c !== 'codicon-modifier-spin') || null;
  }, STATUS_ITEM);
}

/**
 * What the editor draws: its lines as shown, top to bottom (the text of a decoration's `after`
 * is part of its line), the lines (1-based, by their place on screen) that carry a next-edit
 * marker in the gutter, and the cursor's line and column from the status bar.
 */
function view(page) {
  return page.evaluate(() => {
    const editor = document.querySelector('.editor-instance .monaco-editor');
    if (!editor) {
      return undefined;
    }
    // A decoration's `before`/`after` text is the content of its span's pseudo-elements.
    const pseudo = (span, which) => {
      const content = getComputedStyle(span, which).content;
      return /^".*"$/.test(content) ? JSON.parse(content) : '';
    };
    const shown = (line) =>
      [...line.querySelectorAll('span span')]
        .map((s) => pseudo(s, '::before') + s.textContent + pseudo(s, '::after'))
        .join('')
        .replace(/\u00a0/g, ' ');
    const rows = [...editor.querySelectorAll('.view-lines .view-line')]
      .map((line) => ({ top: parseFloat(line.style.top), text: shown(line) }))
      .sort((a, b) => a.top - b.top);
    const markers = [...editor.querySelectorAll('.glyph-margin-widgets .cgmr')]
      .filter((m) => getComputedStyle(m).backgroundImage.includes('next-edit'))
      .map((m) => 1 + rows.findIndex((r) => Math.abs(r.top - parseFloat(m.style.top)) < 2));
    const struck = [...editor.querySelectorAll('.view-line span')]
      .filter((s) => getComputedStyle(s).textDecorationLine.includes('line-through'))
      .map((s) => s.textContent);
    const selection = document.getElementById('status.editor.selection');
    const at = selection && /Ln (\d+), Col (\d+)/.exec(selection.textContent);
    return {
      lines: rows.map((r) => r.text),
      markers,
      struck,
      cursor: at ? { line: Number(at[1]), column: Number(at[2]) } : null,
    };
  });
}

/** Saves (Ctrl+S) until the file on disk reads `want`; the text on disk in the end. */
async function saveAndRead(page, want) {
  const text = await until(
    10000,
    async () => {
      if (readFile() === want) {
        return want;
      }
      if (await page.$('.tabs-container .tab.active.dirty')) {
        await chord(page, ['Control'], 's');
      }
      return undefined;
    },
    300
  );
  return text || readFile();
}

async function openReady(page) {
  await openFile(page);
  const icon = await until(240000, async () => {
    const now = await statusIcon(page);
    return (now === 'codicon-check' || now === 'codicon-error') && now;
  });
  emit({ step: 'ready', ok: icon === 'codicon-check', icon });
  return icon === 'codicon-check';
}

/** A next edit drawn away from the cursor: a marker at `line` and `text` previewed there. */
const previewAt = (v, line, text) =>
  v && v.markers.includes(line) && v.lines[line - 1] && v.lines[line - 1].includes(text);

async function run(page) {
  if (!(await openReady(page))) {
    return;
  }
  const original = readFile();

  // `w` renamed `width`: the rest typed after the parameter's `w` (line 1, column 10).
  await goTo(page, '1:11');
  const typed = Date.now();
  await page.keyboard.type('idth');
  const shown = await until(WAIT_MS, async () => {
    const v = await view(page);
    return previewAt(v, 2, 'return wwidth * h') && v;
  });
  const preview = shown || (await view(page));
  emit({
    step: 'preview',
    ok:
      shown !== undefined &&
      preview.lines[0].includes('next edit at line 2') &&
      preview.struck.includes('w'),
    after_typing_s: (Date.now() - typed) / 1000,
    view: preview,
    screenshot: await screenshot(page, 'preview'),
  });
  if (!shown) {
    return;
  }

  // Tab: to the edit; the document is as typed, the edit is now on the cursor's line (inline:
  // no marker, no hint).
  await page.keyboard.press('Tab');
  const jumped = await until(5000, async () => {
    const v = await view(page);
    return v && v.cursor && v.cursor.line === 2 && v;
  });
  const atEdit = jumped || (await view(page));
  emit({
    step: 'jump',
    ok:
      jumped !== undefined &&
      atEdit.lines[0] === 'def area(width, h):' &&
      atEdit.lines[1].includes('return wwidth * h') &&
      atEdit.markers.length === 0,
    view: atEdit,
    screenshot: await screenshot(page, 'inline'),
  });
  if (!jumped) {
    return;
  }

  // Tab again applies it.
  const want = original.replace('(w, h)', '(width, h)').replace('return w *', 'return width *');
  await page.keyboard.press('Tab');
  const applied = await saveAndRead(page, want);
  const after = await until(5000, async () => {
    const v = await view(page);
    return v && v.struck.length === 0 && v.markers.length === 0 && v;
  });
  emit({
    step: 'apply',
    ok: applied === want && after !== undefined && after.lines[1] === '    return width * h',
    text: applied,
    view: after || (await view(page)),
    screenshot: await screenshot(page, 'applied'),
  });

  // The server counted it, by kind.
  await runCommand(page, 'dLLM: Show Status');
  const line = await until(15000, async () =>
    (await toasts(page)).find((m) => m.startsWith('dLLM: ') && m.includes('next edits'))
  );
  emit({ step: 'counts', ok: line !== undefined, line });
  await page.keyboard.press('Escape'); // the notification's focus back to the editor
  await goTo(page, '1:18');

  // `h` renamed `height` (after `width, h`): a preview again; Esc dismisses it.
  await page.keyboard.type('eight');
  const again = await until(WAIT_MS, async () => {
    const v = await view(page);
    return previewAt(v, 2, 'hheight') && v;
  });
  await page.keyboard.press('Escape');
  const gone = await until(5000, async () => {
    const v = await view(page);
    const drawn = v && (v.markers.length || v.struck.length || v.lines[1].includes('hheight'));
    return v && !drawn && v;
  });
  await sleep(1000); // nothing comes back by itself
  const later = await view(page);
  const typedOnly = want.replace('(width, h)', '(width, height)');
  const kept = await saveAndRead(page, typedOnly);
  emit({
    step: 'dismiss',
    ok:
      again !== undefined &&
      gone !== undefined &&
      later.markers.length === 0 &&
      !later.lines[1].includes('hheight') &&
      kept === typedOnly,
    shown: again,
    after: later,
    text: kept,
    screenshot: await screenshot(page, 'dismissed'),
  });
}

/** With next edits off: the same rename, and nothing drawn or counted. */
async function runOff(page) {
  if (!(await openReady(page))) {
    return;
  }
  await goTo(page, '1:11');
  await page.keyboard.type('idth');
  const drawn = await until(QUIET_MS, async () => {
    const v = await view(page);
    return v && (v.markers.length || v.struck.length || v.lines.join('\n').includes('Tab:')) && v;
  });
  const after = await view(page);
  await runCommand(page, 'dLLM: Show Status');
  const line = await until(15000, async () =>
    (await toasts(page)).find((m) => m.startsWith('dLLM: ready'))
  );
  emit({
    step: 'off',
    ok: drawn === undefined && line !== undefined && !line.includes('next edits'),
    drawn: drawn || null,
    view: after,
    line,
    screenshot: await screenshot(page, 'off'),
  });
}

main({ 'next-edit': run, 'next-edit-off': runOff }, 'next-edit', 'vscode-next-edit-error.png');
