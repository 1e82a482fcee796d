--- Reports what the user did with an inline completion item, so that dllm-infill-ls can count
--- acceptance per language (on the user's machine only; nothing leaves it). The server's items
--- carry an accept command (`dllm.accepted`, with the item's id); the plugin runs it when an
--- item is accepted whole, and sends the standard notifications `textDocument/didShowCompletion`
--- (`{item}`) when an item is drawn and `textDocument/didPartiallyAcceptCompletion` (`{item,
--- acceptedLength}`) when a word or line of it is taken. The server counts each item once per
--- kind; the plugin also reports each item's show once. Items without a command (counting
--- turned off with `stats.enabled = false`) are not reported.

local M = {}

M.sent = { shown = 0, accepted = 0, partial = 0 } -- reports sent, for tests and curiosity

local reported = setmetatable({}, { __mode = 'k' }) -- item table → true once its show is sent

local function notify(client, method, params)
  if vim.fn.has('nvim-0.11') == 1 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

local function counted(item)
  return type(item) == 'table' and type(item.command) == 'table'
end

--- The item as the server sent it: the notifications carry the command, which names the item.
local function wire(item)
  return { insertText = item.insertText or item.insert_text, command = item.command }
end

--- item was drawn as ghost text.
function M.shown(client, item)
  if client and counted(item) and not reported[item] then
    reported[item] = true
    M.last_shown = item
    M.sent.shown = M.sent.shown + 1
    notify(client, 'textDocument/didShowCompletion', { item = wire(item) })
  end
end

--- item was accepted whole: its command runs on the server.
function M.accepted(client, item)
  if client and counted(item) then
    M.sent.accepted = M.sent.accepted + 1
    require('dllm').request(client, 'workspace/executeCommand', item.command, function() end, 0)
  end
end

--- length characters of item (all accepted so far) went into the buffer.
function M.partially_accepted(client, item, length)
  if client and counted(item) and length > 0 then
    M.sent.partial = M.sent.partial + 1
    notify(client, 'textDocument/didPartiallyAcceptCompletion', {
      item = wire(item),
      acceptedLength = length,
    })
  end
end

local function num(v)
  return type(v) == 'number' and v or nil
end

--- The counts and the backend's health of a dllm/status result, as parts of the status line:
--- `3 shown · 1 accepted (33%) · 1 partial · p50 420 ms · slow: median 2500 ms over 2000 ms`.
function M.parts(s)
  local parts = {}
  local stats = type(s.stats) == 'table' and s.stats or {}
  local total = type(stats.total) == 'table' and stats.total or nil
  if stats.enabled == false then
    table.insert(parts, 'counting off')
  elseif total then
    local rate = num(total.acceptance_rate)
    table.insert(parts, ('%d shown'):format(num(total.shown) or 0))
    table.insert(
      parts,
      ('%d accepted'):format(num(total.accepted) or 0)
        .. (rate and (' (%d%%)'):format(math.floor(rate * 100 + 0.5)) or '')
    )
    table.insert(parts, ('%d partial'):format(num(total.partial) or 0))
    if num(total.p50_ms) then
      table.insert(parts, ('p50 %d ms'):format(math.floor(total.p50_ms + 0.5)))
    end
  end
  local health = type(s.health) == 'table' and s.health or {}
  if health.state == 'slow' or health.state == 'failing' then
    table.insert(parts, ('%s: %s'):format(health.state, tostring(health.reason or '')))
  end
  return parts
end

return M
