-- Drives llama.vim (a llama.cpp client no one here wrote) in a real headless Neovim against the
-- service's /infill; test_llama_vim.py runs it as
--   nvim --clean --headless --cmd 'set rtp^=LLAMA_VIM_DIR' --cmd 'lua vim.g.llama_config = ...' \
--     -c 'luafile tests/editors/drive_llama_vim.lua' sample.py
-- Environment: DLLM_RESULT (JSON lines are appended there), DLLM_LINE (the 1-based line to
-- type on), DLLM_TYPE (what to type at its end, in insert mode) and DLLM_CALLS (the folder
-- where test_llama_vim.py's curl recorder saves each call). Each step writes one
-- {"step": ..., "ok": bool, ...} line; the last line is {"step": "done"}.

local api = vim.api
local uv = vim.uv or vim.loop
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local h = dofile(here .. 'harness.lua')
local emit, finish, sleep, wait_for, keys = h.emit, h.finish, h.sleep, h.wait_for, h.keys

local function lines()
  return api.nvim_buf_get_lines(0, 0, -1, true)
end

--- llama.vim's ghost text: the hint chunks of its extmarks in the 'vt_fim' namespace (the first
--- line at the cursor, the others as virtual lines below it), or nil when none is shown.
local function ghost()
  local ns = api.nvim_get_namespaces()['vt_fim']
  if not ns then
    return nil
  end
  local first, rest, info, at = nil, {}, nil, nil
  for _, m in ipairs(api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
    local d = m[4]
    for _, chunk in ipairs(d.virt_text or {}) do
      if chunk[2] == 'llama_hl_fim_hint' then
        first, at = chunk[1], { m[2], m[3] }
      elseif chunk[1] ~= '' then
        info = chunk[1]
      end
    end
    for _, vl in ipairs(d.virt_lines or {}) do
      table.insert(rest, vl[1] and vl[1][1] or '')
    end
  end
  if first == nil then
    return nil
  end
  return { lines = { first, unpack(rest) }, at = at, info = info }
end

--- The answers llama.vim cached (its raw response bodies, as the server sent them).
local function cached()
  local raw = {}
  for _, v in pairs(vim.g.cache_data or {}) do
    table.insert(raw, v)
  end
  return raw
end

local function run()
  emit({
    step = 'loaded',
    ok = vim.fn.exists('*llama#fim') == 1 and vim.fn.exists(':LlamaEnable') == 2,
    version = tostring(vim.version()),
    endpoint = vim.g.llama_config and vim.g.llama_config.endpoint_fim,
  })

  -- In normal mode llama.vim sends a chunk of the file it opened as extra context, with nothing
  -- to write (n_predict 0: a llama.cpp server warms its cache); the fills then carry it.
  local warmed = wait_for(20, function()
    return #vim.fn.glob(assert(os.getenv('DLLM_CALLS')) .. '/*.body', false, true) > 0
  end)
  emit({ step = 'warm', ok = warmed ~= nil })
  sleep(200)

  local row = tonumber(assert(os.getenv('DLLM_LINE')))
  local before = lines()
  api.nvim_win_set_cursor(0, { row, 0 })
  -- Typing at the end of the line moves the cursor: llama.vim's CursorMovedI asks for a fill.
  keys('A' .. assert(os.getenv('DLLM_TYPE')), 'n')
  local shown = wait_for(tonumber(os.getenv('DLLM_GHOST_WAIT') or 120), function()
    local g = ghost()
    local shown_flag = vim.fn['llama#is_fim_hint_shown']()
    return g and (shown_flag == true or shown_flag == 1) and table.concat(g.lines) ~= '' and g
  end)
  local typed = api.nvim_buf_get_lines(0, row - 1, row, true)[1]
  emit({
    step = 'ghost',
    ok = shown ~= nil,
    lines = shown and shown.lines,
    at = shown and shown.at,
    info = shown and shown.info,
    typed = typed,
    cursor = api.nvim_win_get_cursor(0),
    mode = api.nvim_get_mode().mode,
    cached = cached(),
  })
  if not shown then
    return
  end
  -- A later answer (llama.vim's speculative request for the text after this one) may redraw
  -- the hint: let it settle, so that what is accepted is what is on screen.
  local deadline = uv.now() + 3000
  repeat
    sleep(300)
    local again = ghost()
    local stable = again ~= nil and vim.deep_equal(again.lines, shown.lines)
    shown = again or shown
  until stable or uv.now() > deadline

  local tick = api.nvim_buf_get_changedtick(0)
  keys('<Tab>', 'm')
  wait_for(10, function()
    return api.nvim_buf_get_changedtick(0) ~= tick
  end)
  local after = lines()
  emit({
    step = 'accept',
    ok = not vim.deep_equal(after, before),
    before = before,
    after = after,
    ghost = shown.lines,
    typed = typed,
    cursor = api.nvim_win_get_cursor(0),
    cached = cached(),
  })

  keys('<Esc>', 'n')
  wait_for(5, function()
    return api.nvim_get_mode().mode == 'n'
  end)
  sleep(100)
  emit({ step = 'cleared', ok = ghost() == nil, mode = api.nvim_get_mode().mode })
end

vim.defer_fn(function()
  emit({ step = 'watchdog', ok = false, error = 'the script ran past 300 s' })
  finish()
end, 300000)

h.run(run)
