--- The one-line status of the current buffer's server, from its `dllm/status` request: what
--- `:Dllm status` shows and `require('dllm').status(on_line)` gives a statusline component.

local M = {}

--- One line from a dllm/status result: `dllm: ready · builtin on cpu · 12 requests · τ 0.5 ·
--- 3 shown · 1 accepted (33%) · 0 partial · p50 420 ms` (then `slow: ...` or `failing: ...`).
function M.format(s)
  local parts = { 'dllm: ' .. tostring(s.state) }
  if s.state == 'failed' and s.error then
    parts[1] = parts[1] .. ' (' .. tostring(s.error):gsub('\n.*', '') .. ')'
  end
  local where = tostring(s.model)
  if s.device and s.device ~= vim.NIL then
    where = where .. ' on ' .. tostring(s.device)
  end
  table.insert(parts, where)
  table.insert(parts, ('%d requests'):format(tonumber(s.requests) or 0))
  local settings = type(s.settings) == 'table' and s.settings or {}
  local decode = type(settings.decode) == 'table' and settings.decode or {}
  local tau = decode.threshold
  if tau == nil or tau == vim.NIL then
    tau = settings['decode.threshold']
  end
  if tau == nil or tau == vim.NIL then
    tau = s.model_threshold
  end
  if tau ~= nil and tau ~= vim.NIL then
    table.insert(parts, ('τ %g'):format(tau))
  end
  vim.list_extend(parts, require('dllm.stats').parts(s)) -- counts, and a slow or failing backend
  return table.concat(parts, ' · ')
end

--- Calls on_line(line) with the one-line status of the current buffer's server.
function M.request(on_line)
  local dllm = require('dllm')
  local client = require('dllm.client').attached()
  if not client then
    return
  end
  dllm.request(client, 'dllm/status', {}, function(err, result)
    if err then
      on_line('dllm: status failed: ' .. (err.message or vim.inspect(err)))
    else
      on_line(dllm.format_status(result or {}))
    end
  end, 0)
end

return M
