-- Drives the dllm plugin in a real headless Neovim; test_neovim.py runs it as
--   nvim --clean --headless --cmd 'set rtp^=editors/nvim' \
--     -c 'luafile tests/editors/drive.lua' sample.py
-- Environment: DLLM_LS (server command), DLLM_RESULT (JSON lines are appended there), DLLM_T0
-- (the wall time nvim was launched at, in seconds). Each step writes one
-- {"step": ..., "ok": bool, ...} line; the last line is {"step": "done"}.

local api = vim.api
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local h = dofile(here .. 'harness.lua') -- stamps the steps since $DLLM_T0
local emit, sleep, wait_for, keys, lines = h.emit, h.sleep, h.wait_for, h.keys, h.lines

local notes = {}
local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(notes, { msg = msg, level = level })
  return notify(msg, level, opts)
end

--- The ghost text shown in the buffer (ours or Neovim's own), as one string, or nil.
local function ghost_text()
  local spaces = api.nvim_get_namespaces()
  for _, name in ipairs({ 'dllm.ghost', 'nvim.lsp.inline_completion' }) do
    local ns = spaces[name]
    if ns then
      for _, m in ipairs(api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
        local d = m[4]
        if d.virt_text then
          local text = h.chunks(d.virt_text)
          for _, vl in ipairs(d.virt_lines or {}) do
            text = text .. '\n' .. h.chunks(vl)
          end
          return (text:gsub(' %(%d+/%d+%)$', '')), name, m[2], m[3], d.virt_text_pos
        end
      end
    end
  end
end

local function status(client)
  return h.status(client, require('dllm').request)
end

local function run()
  local dllm = require('dllm')
  emit({ step = 'version', ok = true, version = tostring(vim.version()) })

  -- A command that is not executable: one warning, no error.
  dllm.setup({ cmd = { '/nonexistent/dllm-infill-ls' } })
  local warn = notes[#notes]
  emit({
    step = 'missing_cmd_warns',
    ok = warn ~= nil
      and warn.level == vim.log.levels.WARN
      and warn.msg:find('not executable') ~= nil,
    message = warn and warn.msg,
  })

  dllm.setup({
    cmd = { assert(os.getenv('DLLM_LS')) },
    -- the builtin model's fills on automatic triggers too (drafts.trustModel), as the test expects
    init_options = { model = 'builtin', device = 'cpu', drafts = { trustModel = true } },
    inline = os.getenv('DLLM_INLINE') or 'auto',
  })
  emit({ step = 'setup', ok = true, mode = dllm.inline_mode() })

  local client = h.start(function()
    return dllm.client(0)
  end, 240, dllm.request)
  if not client then
    return
  end

  -- Inline completion at the blank line inside mean()'s body.
  local before = lines()
  local row = 3
  assert(before[row] == '', 'fixture: line 3 should be blank')
  api.nvim_win_set_cursor(0, { row, 0 })
  -- Typed indentation, as at a fresh line of the body: the automatic request comes after it.
  keys('i    ', 'n')
  local ghost, source, grow, gcol, pos
  wait_for(tonumber(os.getenv('DLLM_GHOST_WAIT') or 120), function()
    ghost, source, grow, gcol, pos = ghost_text()
    return ghost and ghost ~= ''
  end)
  emit({
    step = 'ghost',
    ok = ghost ~= nil and ghost ~= '',
    text = ghost,
    source = source,
    at = grow and { grow, gcol },
    pos = pos,
    mode = api.nvim_get_mode().mode,
  })
  if not ghost then
    local s = status(client)
    emit({ step = 'debug', ok = false, status = s, last = require('dllm.ghost').last })
    return
  end

  local tick = api.nvim_buf_get_changedtick(0)
  keys('<C-l>', 'm')
  wait_for(10, function()
    return api.nvim_buf_get_changedtick(0) ~= tick
  end)
  local after = lines()
  -- Expected: lines above and below unchanged, the ghost's text inserted at the cursor.
  local expected = vim.list_slice(before, 1, row - 1)
  local fill = vim.split(ghost, '\n', { plain = true })
  local col = 4
  before[row] = '    '
  fill[1] = before[row]:sub(1, col) .. fill[1]
  fill[#fill] = fill[#fill] .. before[row]:sub(col + 1)
  vim.list_extend(expected, fill)
  vim.list_extend(expected, vim.list_slice(before, row + 1, #before))
  emit({
    step = 'accept',
    ok = not vim.deep_equal(after, before) and vim.deep_equal(after, expected),
    inserted = table.concat(vim.list_slice(after, row, row + #fill - 1), '\n'),
    expected = table.concat(fill, '\n'),
    cursor = api.nvim_win_get_cursor(0),
  })

  keys('<Esc>', 'n')
  wait_for(5, function()
    return api.nvim_get_mode().mode == 'n'
  end)
  sleep(100)
  emit({ step = 'cleared', ok = ghost_text() == nil, mode = api.nvim_get_mode().mode })

  -- Mid-line, accept one word (<M-l>): it goes in at the cursor and the rest of the line stays.
  before = lines()
  local mrow, mcol = #before, 0
  for i, l in ipairs(before) do
    if l:match('^    return total') then
      mrow, mcol = i, #'    return '
    end
  end
  api.nvim_win_set_cursor(0, { mrow, mcol - 1 })
  keys('a', 'n')
  local word_ghost = wait_for(60, function()
    local g = ghost_text()
    return g ~= nil and g ~= '' and g
  end)
  if word_ghost then
    -- A later answer for the same cursor may replace the first ghost text: wait until it holds
    -- still, so that the word accepted is read from the ghost text on screen at that moment.
    local deadline = vim.uv.now() + 5000
    repeat
      sleep(300)
      local again = ghost_text()
      local stable = again == word_ghost
      word_ghost = again or word_ghost
    until stable or vim.uv.now() > deadline
    tick = api.nvim_buf_get_changedtick(0)
    keys('<M-l>', 'm')
    wait_for(10, function()
      return api.nvim_buf_get_changedtick(0) ~= tick
    end)
    local line = api.nvim_buf_get_lines(0, mrow - 1, mrow, true)[1]
    local old = before[mrow]
    local head, tail = old:sub(1, mcol), old:sub(mcol + 1)
    local word = line:sub(#head + 1, #line - #tail)
    emit({
      step = 'accept_word',
      ok = line:sub(1, #head) == head
        and line:sub(-#tail) == tail
        and word ~= ''
        and word_ghost:sub(1, #word) == word,
      ghost = word_ghost,
      word = word,
      line = line,
    })
  else
    emit({ step = 'accept_word', ok = true, skipped = 'no completion offered mid-line' })
  end
  keys('<Esc>', 'n')
  wait_for(5, function()
    return api.nvim_get_mode().mode == 'n'
  end)

  -- A word of a longer item, in a new function's body: counted as a partial accept (the word
  -- above may have been the whole of its item, which is an accept).
  local saved = lines()
  local whole_word = word_ghost ~= nil and not word_ghost:find('[^%w_]')
  -- A fill of two words or more (the builtin model writes short ones): a few places are tried.
  local function splits(g)
    return g ~= nil and (g:match('^[ \t]*[%w_]+[^%w_]') or g:match('^[ \t]*[^%w_%s]+[%w_%s]'))
  end
  local long
  for _, head in ipairs({ 'def total(values):', '    result = [', '    for i in range(', '    x = ' }) do
    api.nvim_buf_set_lines(0, 0, -1, true, vim.list_extend(vim.deepcopy(saved), { '', head }))
    api.nvim_win_set_cursor(0, { #lines(), #head })
    keys(head:sub(-1) == ':' and 'o    ' or 'a', 'n')
    long = wait_for(20, function()
      local g = ghost_text()
      return splits(g) and g
    end)
    if long then
      break
    end
    keys('<Esc>', 'n')
    wait_for(5, function()
      return api.nvim_get_mode().mode == 'n'
    end)
  end
  if long then
    tick = api.nvim_buf_get_changedtick(0)
    keys('<M-l>', 'm')
    wait_for(10, function()
      return api.nvim_buf_get_changedtick(0) ~= tick
    end)
  end
  emit({ step = 'accept_part', ok = long ~= nil, ghost = long, line = lines()[#lines()] })
  keys('<Esc>', 'n')
  wait_for(5, function()
    return api.nvim_get_mode().mode == 'n'
  end)
  api.nvim_buf_set_lines(0, 0, -1, true, saved)

  -- The counts read back through dllm/status: one item accepted whole, one a word of it, each
  -- shown item counted once (a repeated report of one changes nothing); Neovim 0.12's own ghost
  -- text reports no shows, so there the server counts the two items it heard of.
  local sent = require('dllm.stats').sent
  local function totals()
    local s = status(client)
    return s and s.stats and s.stats.total or {}
  end
  local partial = (word_ghost and not whole_word and 1 or 0) + 1
  local accepted = 1 + (whole_word and 1 or 0)
  local counts = wait_for(10, function()
    local t = totals()
    return t.accepted == accepted and t.partial == partial and t
  end) or totals()
  local item = require('dllm.stats').last_shown
  if item then -- one more show of an item already counted
    local again = { insertText = item.insertText, command = item.command }
    client:notify('textDocument/didShowCompletion', { item = again })
    client:notify('textDocument/didShowCompletion', { item = again })
  end
  sleep(300)
  local recount = totals()
  local native = dllm.inline_mode() == 'native'
  emit({
    step = 'counts',
    ok = counts.accepted == accepted
      and counts.partial == partial
      and (native and counts.shown == accepted + partial or (not native and counts.shown == sent.shown))
      and counts.shown >= accepted + partial
      and (native or (item ~= nil and recount.shown == counts.shown)),
    counts = counts,
    sent = sent,
    recount = recount,
  })

  -- <M-]>: the fallback asks for several candidates (an invoked request) and cycles them.
  if dllm.inline_mode() == 'fallback' then
    local ghost = require('dllm.ghost')
    local saved = lines()
    -- The same line whatever the model accepted above: after `return ` the builtin model offers
    -- more than one candidate that passes the server's syntax check.
    api.nvim_buf_set_lines(0, 2, 3, true, { '    return' })
    api.nvim_win_set_cursor(0, { 3, 0 })
    keys('A ', 'n')
    wait_for(5, function()
      return api.nvim_get_mode().mode == 'i'
    end)
    sleep(400) -- past the automatic request's debounce, so the invoked one is the last
    keys('<M-]>', 'm')
    local first = wait_for(20, function()
      return ghost.current()
    end)
    local shown = {}
    local n = first and #require('dllm.ghost')._items() or 0
    for _ = 1, n do
      table.insert(shown, ghost.current())
      keys('<M-]>', 'm')
      sleep(50)
    end
    emit({
      step = 'cycle',
      ok = first ~= nil and (n < 2 or shown[1] ~= shown[2]) and ghost.current() == first,
      candidates = n,
      shown = shown,
      last = not first and require('dllm.ghost').last or nil,
    })
    keys('<Esc>', 'n')
    wait_for(5, function()
      return api.nvim_get_mode().mode == 'n'
    end)
    api.nvim_buf_set_lines(0, 0, -1, true, saved) -- the later steps see the same text as on 0.12
  end

  -- An automatic request (as ghost text sends one) at the cursor: its items, and whether the
  -- engine saw it (dllm/status's request count).
  local function automatic_at(row, col)
    api.nvim_win_set_cursor(0, { row, col })
    local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
    params.context = { triggerKind = 2 }
    -- the count once earlier requests (the fallback's cycling, say) have all reached the engine
    local seen = status(client).requests
    wait_for(10, function()
      sleep(300)
      local now = status(client).requests
      local still = now == seen
      seen = now
      return still
    end)
    local items
    dllm.request(client, 'textDocument/inlineCompletion', params, function(err, r)
      items = err and { err } or (r and (r.items or r)) or {}
    end, 0)
    items = wait_for(60, function()
      return items
    end)
    return items, status(client).requests - seen
  end

  -- At the end of a comment line: nothing, and the engine is never asked.
  local saved = lines()
  api.nvim_buf_set_lines(0, -1, -1, true, { '# the range is inclusive ' })
  local comment_items, comment_calls = automatic_at(#lines(), #lines()[#lines()])
  emit({
    step = 'comment',
    ok = comment_items ~= nil and #comment_items == 0 and comment_calls == 0,
    items = comment_items,
    engine_calls = comment_calls,
  })
  api.nvim_buf_set_lines(0, 0, -1, true, saved)

  -- :Dllm snooze 5: automatic requests get nothing until :Dllm snooze 0.
  dllm.last_command = nil
  vim.cmd('Dllm snooze 5')
  local snoozed = wait_for(10, function()
    return dllm.last_command
  end)
  local body_row = 3
  api.nvim_buf_set_lines(0, body_row - 1, body_row, true, { '    ' })
  local quiet_items, quiet_calls = automatic_at(body_row, 4)
  dllm.last_command = nil
  vim.cmd('Dllm snooze 0')
  local woken = wait_for(10, function()
    return dllm.last_command
  end)
  local awake_items, awake_calls = automatic_at(body_row, 4)
  emit({
    step = 'snooze',
    ok = snoozed ~= nil
      and snoozed.result ~= nil
      and snoozed.result.snoozed_s > 290
      and quiet_items ~= nil
      and #quiet_items == 0
      and quiet_calls == 0
      and woken ~= nil
      and woken.result.snoozed_s == 0
      and (awake_calls == 1 or #awake_items > 0), -- a typed-ahead answer needs no engine call
    snoozed = snoozed and snoozed.result,
    quiet = quiet_items,
    awake = awake_items,
  })
  api.nvim_buf_set_lines(0, 0, -1, true, saved)

  -- :Dllm fill inside clamp(), whose body is code (`return value`): the plugin asks first
  -- (dllm.confirm, vim.fn.confirm by default); declined, nothing changes; confirmed, the body
  -- after the docstring is rewritten.
  before = lines()
  local def
  for i, l in ipairs(before) do
    if l:match('^def clamp') then
      def = i
    end
  end
  local asked = {}
  dllm.confirm = function(question)
    table.insert(asked, question)
    return #asked > 1 -- the first question is declined, the second confirmed
  end
  api.nvim_win_set_cursor(0, { def + 2, 4 })
  tick = api.nvim_buf_get_changedtick(0)
  dllm.last_command = nil
  vim.cmd('Dllm fill')
  local declined = wait_for(120, function()
    return dllm.last_command
  end)
  emit({
    step = 'fill_asks',
    ok = declined ~= nil
      and declined.result ~= nil
      and declined.result.applied == false
      and #asked == 1
      and asked[1]:find('clamp()', 1, true) ~= nil
      and api.nvim_buf_get_changedtick(0) == tick
      and vim.deep_equal(lines(), before),
    question = asked[1],
    result = declined and declined.result,
  })
  vim.cmd('Dllm fill')
  wait_for(120, function()
    return api.nvim_buf_get_changedtick(0) ~= tick
  end)
  after = lines()
  emit({
    step = 'fill',
    ok = #asked == 2
      and not vim.deep_equal(after, before)
      and vim.deep_equal(vim.list_slice(after, 1, def + 1), vim.list_slice(before, 1, def + 1)),
    body = table.concat(vim.list_slice(after, def + 2, #after), '\n'),
  })

  -- :Dllm regenerate with an instruction and :Dllm refine, on the lines of mean().
  for _, case in ipairs({
    { step = 'regenerate', cmd = '1,4Dllm regenerate add up the values' },
    { step = 'refine', cmd = '1,4Dllm refine' },
  }) do
    before = lines()
    tick = api.nvim_buf_get_changedtick(0)
    dllm.last_command = nil
    vim.cmd(case.cmd)
    local answer = wait_for(60, function()
      return dllm.last_command
    end)
    wait_for(5, function()
      return api.nvim_buf_get_changedtick(0) ~= tick
    end)
    after = lines()
    local result = answer and answer.result or {}
    emit({
      step = case.step,
      -- The server answered the command; the builtin model may write nothing for a selection,
      -- or text that would add a syntax error (its message says so), and then the text stays.
      ok = answer ~= nil
        and answer.err == nil
        and (
          result.applied
          or (result.message or ''):find('wrote nothing') ~= nil
          or (result.message or ''):find('not applied') ~= nil
        ),
      changed = not vim.deep_equal(after, before),
      result = result,
      text = table.concat(vim.list_slice(after, 1, 6), '\n'),
    })
  end

  -- :Dllm status: one line.
  local n = #notes
  vim.cmd('Dllm status')
  local line = wait_for(10, function()
    return #notes > n and notes[#notes].msg
  end)
  emit({
    step = 'status',
    ok = type(line) == 'string' and line:match('^dllm: ready') ~= nil and not line:find('\n'),
    line = line,
  })
end

h.watchdog(400)

h.run(run)
