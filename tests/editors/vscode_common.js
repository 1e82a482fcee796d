'use strict';
// What the VS Code drivers (drive_vscode.js, drive_vscode_next_edit.js) share: the environment
// code_server.py's `drive` gives them (DLLM_URL, DLLM_FILE, DLLM_RESULT, DLLM_SCREENS,
// DLLM_PROFILE, DLLM_T0, DLLM_CHROMIUM, DLLM_SCENARIO), the JSON step lines ({"step", "ok", "t":
// seconds since code-server's launch, ...}), polling, keys, the quick input (the palette, Go to
// Line), the workbench with DLLM_FILE opened, and `main`: chromium launched, the scenario run, an
// error's screenshot, and the last step, "done".

const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set`);
  }
  return value;
};
const URL = env('DLLM_URL');
const FILE = env('DLLM_FILE');
const RESULT = env('DLLM_RESULT');
const SCREENS = env('DLLM_SCREENS');
const PROFILE = env('DLLM_PROFILE');
const T0 = Number(env('DLLM_T0'));
const CHROMIUM = process.env.DLLM_CHROMIUM || '/usr/bin/chromium';
const NAME = path.basename(FILE);
const STATUS_ITEM = 'dllm-infill.dllm-infill'; // the DOM id VS Code gives the extension's item

const sinceLaunch = () => Date.now() / 1000 - T0;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const readFile = () => fs.readFileSync(FILE, 'utf8');

function emit(record) {
  fs.appendFileSync(RESULT, JSON.stringify({ ...record, t: sinceLaunch() }) + '\n');
}

/** A screenshot of the page, SCREENS/`name`; its path. */
async function screenshot(page, name) {
  const file = path.join(SCREENS, name);
  await page.screenshot({ path: file });
  return file;
}

/** Polls fn (async, in this process) until it returns something truthy or timeoutMs passes. */
async function until(timeoutMs, fn, everyMs = 250) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      return undefined;
    }
    await sleep(everyMs);
  }
}

async function chord(page, modifiers, key) {
  for (const m of modifiers) {
    await page.keyboard.down(m);
  }
  await page.keyboard.press(key);
  for (const m of [...modifiers].reverse()) {
    await page.keyboard.up(m);
  }
}

/** The labels of the quick input's visible rows (command palette, quick open, go to line). */
function quickInputRows(page) {
  return page.$$eval('.quick-input-widget .quick-input-list .monaco-list-row', (rows) =>
    rows.map((row) => row.getAttribute('aria-label') || row.textContent)
  );
}

async function quickInputOpen(page) {
  await page.waitForSelector('.quick-input-widget .quick-input-box input', {
    visible: true,
    timeout: 15000,
  });
}

/** Runs a palette command by its exact title. */
async function runCommand(page, title) {
  await page.keyboard.press('F1');
  await quickInputOpen(page);
  await page.keyboard.type(title);
  const found = await until(15000, async () =>
    (await quickInputRows(page)).some((label) => label.startsWith(title))
  );
  if (!found) {
    await page.keyboard.press('Escape');
    throw new Error(`the palette has no command "${title}": ${await quickInputRows(page)}`);
  }
  await page.keyboard.press('Enter');
}

/** Moves the cursor with Go to Line (Ctrl+G), `where` as "line" or "line:column" (1-based). */
async function goTo(page, where) {
  await chord(page, ['Control'], 'g');
  await quickInputOpen(page);
  await page.keyboard.type(where);
  await sleep(200);
  await page.keyboard.press('Enter');
  await page.waitForSelector('.quick-input-widget', { hidden: true, timeout: 10000 });
}

/** The notification toasts' messages. */
function toasts(page) {
  return page.$$eval('.notifications-toasts .notification-list-item-message', (els) =>
    els.map((e) => e.textContent)
  );
}

/** The workbench with FILE in its explorer (the step workbench), then FILE opened with Quick
 * Open, which activates the extension, and the editor focused (the step open). */
async function openFile(page) {
  await page.goto(URL, { waitUntil: 'domcontentloaded', timeout: 60000 });
  await page.waitForSelector('.monaco-workbench .part.statusbar', { timeout: 90000 });
  await page.waitForFunction(
    (name) =>
      [...document.querySelectorAll('.explorer-folders-view .monaco-list-row')].some((row) =>
        row.textContent.includes(name)
      ),
    { timeout: 60000 },
    NAME
  );
  emit({ step: 'workbench', ok: true });

  await chord(page, ['Control'], 'p');
  await quickInputOpen(page);
  await page.keyboard.type(NAME);
  await until(15000, async () => (await quickInputRows(page)).some((l) => l.includes(NAME)));
  await page.keyboard.press('Enter');
  await page.waitForSelector(`.tabs-container .tab.active[aria-label*="${NAME}"]`, {
    timeout: 30000,
  });
  await page.waitForFunction(
    () => document.activeElement && document.activeElement.closest('.monaco-editor'),
    { timeout: 30000 }
  );
  emit({ step: 'open', ok: true });
}

/**
 * Launches chromium (step browser), runs `scenarios[DLLM_SCENARIO or fallback](page)` and ends
 * with the step done; an error is a step error with a screenshot, SCREENS/`errorShot`.
 */
async function run(scenarios, fallback, errorShot) {
  fs.mkdirSync(SCREENS, { recursive: true });
  const browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: PROFILE,
    // As root chromium needs --no-sandbox; the network flags keep it off everything but
    // 127.0.0.1 (this machine's network is closed, and every refused connection is noise).
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--window-size=1400,900',
    ],
    defaultViewport: { width: 1400, height: 900 },
    timeout: 60000,
  });
  emit({ step: 'browser', ok: true, version: await browser.version() });
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (error) => errors.push(String(error).slice(0, 300)));
  const watchdog = setTimeout(() => {
    emit({ step: 'watchdog', ok: false, error: 'the driver ran past 420 s' });
    process.exit(2);
  }, 420000);
  try {
    const name = process.env.DLLM_SCENARIO || fallback;
    const scenario = scenarios[name];
    if (!scenario) {
      throw new Error(`DLLM_SCENARIO is ${Object.keys(scenarios).join(' or ')}, not ${name}`);
    }
    await scenario(page);
  } catch (error) {
    let shot;
    try {
      shot = await screenshot(page, errorShot);
    } catch {
      shot = undefined;
    }
    emit({ step: 'error', ok: false, error: String(error.stack || error), screenshot: shot });
  } finally {
    clearTimeout(watchdog);
    emit({ step: 'done', ok: true, page_errors: errors });
    await browser.close();
  }
}

/** `run`, and an error outside it a step error and exit status 1. */
function main(scenarios, fallback, errorShot) {
  run(scenarios, fallback, errorShot).catch((error) => {
    emit({ step: 'error', ok: false, error: String(error.stack || error) });
    process.exit(1);
  });
}

module.exports = {
  chord,
  emit,
  env,
  FILE,
  goTo,
  main,
  NAME,
  openFile,
  quickInputOpen,
  quickInputRows,
  readFile,
  runCommand,
  screenshot,
  sleep,
  STATUS_ITEM,
  toasts,
  until,
};
