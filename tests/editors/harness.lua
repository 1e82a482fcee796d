-- The steps the Neovim driver scripts share (drive_fim.lua, drive_llama_vim.lua): results as JSON
-- lines appended to $DLLM_RESULT, each stamped with the seconds since the script started; a
-- coroutine that sleeps on Neovim's timers; waiting for a condition; typing keys; and running the
-- script's main function, whose error becomes an {"step": "error"} line before the last, "done".
-- A driver loads it with dofile, next to itself.

local api = vim.api
local uv = vim.uv or vim.loop
local out = assert(io.open(assert(os.getenv('DLLM_RESULT')), 'a'))
local started = uv.now()
local co
local M = {}

function M.emit(t)
  t.t = (uv.now() - started) / 1000
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

return M
