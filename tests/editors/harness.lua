-- The steps the Neovim driver scripts share (drive*.lua): results as JSON lines appended to
-- $DLLM_RESULT, each stamped with the seconds since the script started (since $DLLM_T0, the wall
-- time nvim was launched at, where that is set); a coroutine that sleeps on Neovim's timers;
-- waiting for a condition; typing keys; and running the script's main function, whose error
-- becomes an {"step": "error"} line before the last, "done". Then what the next-edit drivers
-- and the plugin's share: the buffer's lines, a virtual text's chunks, dllm/status, the steps
-- attach and ready, <Tab> and waiting for what it does, and a watchdog.
-- A driver loads it with dofile, next to itself.

local api = vim.api
local uv = vim.uv or vim.loop
local out = assert(io.open(assert(os.getenv('DLLM_RESULT')), 'a'))
local started = uv.now()
local T0 = tonumber(os.getenv('DLLM_T0'))
local co
local M = {}

local function elapsed()
  if T0 then
    local s, us = uv.gettimeofday()
    return s + us / 1e6 - T0
  end
  return (uv.now() - started) / 1000
end

function M.emit(t)
  t.t = elapsed()
  out:write(vim.json.encode(t), '\n')
  out:flush()
end

function M.finish()
  M.emit({ step = 'done', ok = true })
  out:close()
  vim.cmd('qa!')
end

function M.sleep(ms)
  vim.defer_fn(function()
    local ok, err = coroutine.resume(co)
    if not ok then
      M.emit({ step = 'error', ok = false, error = tostring(err) })
      M.finish()
    end
  end, ms)
  coroutine.yield()
end

function M.wait_for(timeout_s, cond)
  local deadline = uv.now() + timeout_s * 1000
  while true do
    local v = cond()
    if v then
      return v
    end
    if uv.now() > deadline then
      return nil
    end
    M.sleep(50)
  end
end

function M.keys(s, mode)
  api.nvim_feedkeys(api.nvim_replace_termcodes(s, true, false, true), mode, false)
end

--- Run `main` in the coroutine that `sleep` yields from, then finish.
function M.run(main)
  co = coroutine.create(function()
    local ok, err = xpcall(main, debug.traceback)
    if not ok then
      M.emit({ step = 'error', ok = false, error = tostring(err) })
    end
    M.finish()
  end)
  vim.schedule(function()
    local ok, err = coroutine.resume(co)
    if not ok then
      M.emit({ step = 'error', ok = false, error = tostring(err) })
      M.finish()
    end
  end)
end

function M.lines()
  return api.nvim_buf_get_lines(0, 0, -1, true)
end

--- The text of a virtual text's (or a virtual line's) chunks, {text, highlight} each, joined.
function M.chunks(chunks)
  local parts = {}
  for _, chunk in ipairs(chunks) do
    table.insert(parts, chunk[1])
  end
  return table.concat(parts)
end

--- The server's dllm/status, asked through `request(client, method, params, handler, bufnr)`
--- (the client's own request unless given); nil when no answer came in 10 s.
function M.status(client, request)
  local result
  local function handler(err, r)
    result = err and { state = 'error', error = err.message } or r
  end
  if request then
    request(client, 'dllm/status', {}, handler, 0)
  else
    client:request('dllm/status', {}, handler, 0)
  end
  return M.wait_for(10, function()
    return result
  end)
end

--- Waits up to 30 s for `get_client()` and emits the step attach (with its position encoding);
--- the client, or nil.
function M.attach(get_client)
  local client = M.wait_for(30, get_client)
  M.emit({ step = 'attach', ok = client ~= nil, encoding = client and client.offset_encoding })
  return client
end

--- Waits up to `timeout_s` for `status()` to say ready, failed or error, and emits the step
--- ready (its state, and the fields `extra(st)` returns, if given); the status when ready.
function M.ready(timeout_s, status, extra)
  local st = M.wait_for(timeout_s, function()
    local s = status()
    return s and (s.state == 'ready' or s.state == 'failed' or s.state == 'error') and s
  end)
  local step = { step = 'ready', ok = st ~= nil and st.state == 'ready', state = st and st.state }
  for k, v in pairs(extra and extra(st) or {}) do
    step[k] = v
  end
  M.emit(step)
  return st and st.state == 'ready' and st or nil
end

--- The steps attach (`get_client()`, waited for) and ready (up to `ready_s`, its dllm/status
--- asked through `request`, `extra` as there): the client and a function that asks its
--- dllm/status; nil when either step failed.
function M.start(get_client, ready_s, request, extra)
  local client = M.attach(get_client)
  if not client then
    return nil
  end
  local function status()
    return M.status(client, request)
  end
  if not M.ready(ready_s, status, extra) then
    return nil
  end
  return client, status
end

--- A get_client for `start`: the LSP client named `name` attached to the current buffer.
function M.lsp_client(name)
  return function()
    return vim.lsp.get_clients({ name = name, bufnr = 0 })[1]
  end
end

--- The rename the next-edit drivers make, as a person makes it: `w` (line 1, column 9) changed
--- to `width` with `ciw`, and back to Normal mode unless `insert`.
function M.rename_w(insert)
  api.nvim_win_set_cursor(0, { 1, 9 })
  M.keys(insert and 'ciwwidth' or 'ciwwidth<Esc>', 'n')
end

--- A next edit's fields for a step: its range, text and command.
function M.edit_fields(e)
  return e and { range = e.range, text = e.text, command = e.command }
end

--- A condition: the cursor is on `row` (1-based).
function M.on_row(row)
  return function()
    return api.nvim_win_get_cursor(0)[1] == row
  end
end

--- A condition: the buffer's lines are no longer `before`.
function M.changed(before)
  return function()
    return not vim.deep_equal(M.lines(), before)
  end
end

--- Types <Tab> (mapped) and waits up to 5 s for `cond`; what it returned, or nil.
function M.tab(cond)
  M.keys('<Tab>', 'm')
  return M.wait_for(5, cond)
end

--- What the drivers of other clients (copilot-lsp, sidekick) do after the rename: wait up to
--- 60 s for `preview()` and emit the step preview (with the fields of the edit `edit()` gives),
--- then <Tab> to line 2 (the step jump) and <Tab> again. Whether that changed the buffer; nil
--- when no preview came.
function M.preview_jump_apply(preview, edit)
  local p = M.wait_for(60, preview)
  local e = M.edit_fields(edit())
  M.emit({ step = 'preview', ok = p ~= nil, preview = p, lines = M.lines(), edit = e })
  if not p then
    return nil
  end
  local before = M.lines()
  M.tab(M.on_row(2))
  M.emit({ step = 'jump', ok = true, cursor = api.nvim_win_get_cursor(0), lines = M.lines() })
  return M.tab(M.changed(before)) ~= nil
end

--- After `limit_s`, a failed step watchdog and the end, should the script still be running.
function M.watchdog(limit_s)
  vim.defer_fn(function()
    M.emit({ step = 'watchdog', ok = false, error = ('the script ran past %d s'):format(limit_s) })
    M.finish()
  end, limit_s * 1000)
end

return M
