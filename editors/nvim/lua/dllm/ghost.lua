--- Ghost text for Neovim 0.10/0.11, which have no vim.lsp.inline_completion: requests
--- textDocument/inlineCompletion on a debounce in Insert mode, draws the current item with
--- extmarks (first line inline at the cursor, the others as virtual lines), and accepts it whole,
--- by word or by line. Also the partial accept for 0.12's native items (apply_native).
---
--- The server's items replace cursor → end of line with insertText = fill .. rest of the line, so
--- the fill is insertText without that rest; the ghost shows the fill only.

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('dllm.ghost')
local INVOKED, AUTOMATIC = 1, 2

M.ns = ns
M.config = { debounce_ms = 150, name = 'dllm' }

--- Per buffer: { timer, client_id, request_id, items = { fill strings }, index, row, col, tick,
--- keep = { row, col, tick } (the state a partial accept leaves, which must not clear the ghost),
--- raw = { the server's item of each fill }, taken = characters of it accepted so far }
local state = {}

local function buf_state(buf)
  state[buf] = state[buf] or {}
  return state[buf]
end

local function cursor()
  local pos = api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

local function cancel(s)
  if s.timer then
    s.timer:stop()
    if not s.timer:is_closing() then
      s.timer:close()
    end
    s.timer = nil
  end
  if s.request_id then
    local client = vim.lsp.get_client_by_id(s.client_id)
    if client then
      require('dllm').cancel(client, s.request_id)
    end
    s.request_id = nil
  end
end

--- Clears the ghost text of buf (0: current) and cancels its pending request.
function M.clear(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local s = buf_state(buf)
  cancel(s)
  s.items, s.index, s.keep, s.raw, s.taken = nil, nil, nil, nil, nil
  if api.nvim_buf_is_valid(buf) then
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  end
end

--- The fill being shown in the current buffer, or nil.
function M.current()
  local s = state[api.nvim_get_current_buf()]
  return s and s.items and s.items[s.index] or nil
end

--- The candidates of the current buffer (fills), for tests and statuslines.
function M._items()
  local s = state[api.nvim_get_current_buf()]
  return s and s.items or {}
end

function M.visible()
  return M.current() ~= nil
end

local function draw(buf)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local s = buf_state(buf)
  local fill = s.items and s.items[s.index]
  if not fill then
    return
  end
  local lines = vim.split(fill, '\n', { plain = true })
  local line = api.nvim_buf_get_lines(buf, s.row, s.row + 1, true)[1]
  local rest = line:sub(s.col + 1)
  local virt_lines = {}
  for i = 2, #lines do
    -- the rest of the line moves to the end of the fill
    local text = lines[i] .. (i == #lines and rest or '')
    table.insert(virt_lines, { { text, 'DllmGhost' } })
  end
  if #s.items > 1 and #virt_lines == 0 then
    lines[1] = lines[1] .. (' (%d/%d)'):format(s.index, #s.items)
  end
  local inline = vim.fn.has('nvim-0.10') == 1
  api.nvim_buf_set_extmark(buf, ns, s.row, s.col, {
    virt_text = { { lines[1], 'DllmGhost' } },
    virt_text_pos = inline and 'inline' or 'eol',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = 'combine',
  })
  require('dllm.stats').shown(vim.lsp.get_client_by_id(s.client_id or -1), s.raw and s.raw[s.index])
end

--- The fill of an item: insertText without the rest of the line it replaces.
local function fill_of(item, rest)
  local text = item.insertText
  if type(text) == 'table' then
    text = text.value -- a snippet: shown and inserted as plain text
  end
  if type(text) ~= 'string' then
    return nil
  end
  if rest ~= '' and text:sub(-#rest) == rest then
    text = text:sub(1, #text - #rest)
  end
  return text ~= '' and text or nil
end

local function on_result(buf, row, col, tick, client, err, result)
  local s = buf_state(buf)
  s.request_id = nil
  M.last = { err = err, result = result, at = { row, col } } -- the latest answer, for :lua =
  if err or not result or not api.nvim_buf_is_valid(buf) then
    return
  end
  local r, c = cursor()
  local mode = api.nvim_get_mode().mode
  if api.nvim_get_current_buf() ~= buf or r ~= row or c ~= col or mode:sub(1, 1) ~= 'i' then
    return
  end
  if api.nvim_buf_get_changedtick(buf) ~= tick then
    return
  end
  local line = api.nvim_buf_get_lines(buf, row, row + 1, true)[1]
  local rest = line:sub(col + 1)
  local fills, raw, seen = {}, {}, {}
  for _, item in ipairs(result.items or result) do
    local start = item.range and item.range.start
    local at_cursor = not start
      or (
        start.line == row
        and vim.lsp.util.character_offset(buf, row, col, client.offset_encoding) == start.character
      )
    local fill = at_cursor and fill_of(item, rest)
    if fill and not seen[fill] then
      seen[fill] = true
      table.insert(fills, fill)
      table.insert(raw, item)
    end
  end
  if #fills == 0 then
    return
  end
  s.items, s.index, s.row, s.col, s.raw, s.client_id = fills, 1, row, col, raw, client.id
  draw(buf)
end

--- Requests completions at the cursor now (kind: 1 invoked, 2 automatic).
function M.request(kind)
  local buf = api.nvim_get_current_buf()
  local client = require('dllm').client(buf)
  if not client then
    return
  end
  local s = buf_state(buf)
  cancel(s)
  local row, col = cursor()
  local tick = api.nvim_buf_get_changedtick(buf)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = kind or INVOKED }
  local ok, id = require('dllm').request(
    client,
    'textDocument/inlineCompletion',
    params,
    function(err, result)
      on_result(buf, row, col, tick, client, err, result)
    end,
    buf
  )
  if ok then
    s.client_id, s.request_id = client.id, id
  end
end

local function schedule(buf)
  local s = buf_state(buf)
  local r, c = cursor()
  local keep = s.keep
  local tick = api.nvim_buf_get_changedtick(buf)
  if keep and keep.row == r and keep.col == c and keep.tick == tick then
    return -- the cursor and text a partial accept left: the rest of the ghost stays
  end
  M.clear(buf)
  s.timer = vim.defer_fn(function()
    s.timer = nil
    if api.nvim_get_current_buf() == buf and api.nvim_get_mode().mode:sub(1, 1) == 'i' then
      M.request(AUTOMATIC)
    end
  end, M.config.debounce_ms)
end

--- The part of fill that `kind` accepts: 'all', 'word' or 'line'.
local function part_of(fill, kind)
  if kind == 'word' then
    return fill:match('^\n[ \t]*') or fill:match('^[ \t]*[%w_]+') or fill:match('^[ \t]*[^%w_%s]+')
      or fill
  elseif kind == 'line' then
    return fill:match('^\n[^\n]*') or fill:match('^[^\n]+') or fill
  end
  return fill
end

--- Inserts text at (row, col) of buf and puts the cursor after it.
local function insert_at(buf, row, col, text)
  local lines = vim.split(text, '\n', { plain = true })
  api.nvim_buf_set_text(buf, row, col, row, col, lines)
  local end_row = row + #lines - 1
  local end_col = (#lines == 1 and col or 0) + #lines[#lines]
  api.nvim_win_set_cursor(0, { end_row + 1, end_col })
  return end_row, end_col
end

--- Accepts the current item: 'all' (default), 'word' or 'line'.
function M.accept(kind)
  local buf = api.nvim_get_current_buf()
  local s = buf_state(buf)
  local fill = s.items and s.items[s.index]
  if not fill then
    return false
  end
  local part = part_of(fill, kind or 'all')
  local row, col = s.row, s.col
  local raw, taken = s.raw and s.raw[s.index], (s.taken or 0) + vim.fn.strchars(part)
  local client = vim.lsp.get_client_by_id(s.client_id or -1)
  M.clear(buf)
  local end_row, end_col = insert_at(buf, row, col, part)
  local left = fill:sub(#part + 1)
  local stats = require('dllm.stats')
  if left ~= '' then
    s.items, s.index, s.row, s.col = { left }, 1, end_row, end_col
    s.raw, s.taken = { raw }, taken
    s.keep = { row = end_row, col = end_col, tick = api.nvim_buf_get_changedtick(buf) }
    stats.partially_accepted(client, raw, taken)
    draw(buf)
  else
    stats.accepted(client, raw) -- the whole item is in, at once or piece by piece
  end
  return true
end

--- Partial accept of a native (0.12) item, from vim.lsp.inline_completion.get's on_accept.
function M.apply_native(item, kind)
  local buf = api.nvim_get_current_buf()
  local row, col = cursor()
  local line = api.nvim_buf_get_lines(buf, row, row + 1, true)[1]
  local fill = fill_of({ insertText = item.insert_text }, line:sub(col + 1))
  if fill then
    local part = part_of(fill, kind)
    insert_at(buf, row, col, part)
    -- Neovim's own ghost text tells no one what it shows: the partial accept is the first
    -- report of the item (the server then counts it shown as well).
    local client = vim.lsp.get_client_by_id(item.client_id or -1)
    require('dllm.stats').partially_accepted(client, item, vim.fn.strchars(part))
  end
end

--- Shows the next (1) or previous (-1) candidate; with one, asks the server for more.
function M.cycle(step)
  local buf = api.nvim_get_current_buf()
  local s = buf_state(buf)
  if not s.items or #s.items < 2 then
    M.request(INVOKED) -- an invoked request returns several candidates
    return
  end
  s.index = (s.index - 1 + step) % #s.items + 1
  draw(buf)
end

function M.setup(cfg)
  M.config = vim.tbl_extend('force', M.config, { debounce_ms = cfg.debounce_ms, name = cfg.name })
  local group = api.nvim_create_augroup('dllm_ghost', { clear = true })
  api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if not client or client.name ~= M.config.name then
        return
      end
      local buf = ev.buf
      local bgroup = api.nvim_create_augroup('dllm_ghost_' .. buf, { clear = true })
      api.nvim_create_autocmd({ 'InsertEnter', 'CursorMovedI', 'TextChangedI' }, {
        group = bgroup,
        buffer = buf,
        callback = function()
          schedule(buf)
        end,
      })
      api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
        group = bgroup,
        buffer = buf,
        callback = function()
          M.clear(buf)
        end,
      })
      if api.nvim_get_mode().mode:sub(1, 1) == 'i' and api.nvim_get_current_buf() == buf then
        schedule(buf)
      end
    end,
  })
  api.nvim_create_autocmd('LspDetach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.config.name then
        M.clear(ev.buf)
        pcall(api.nvim_del_augroup_by_name, 'dllm_ghost_' .. ev.buf)
      end
    end,
  })
end

return M
