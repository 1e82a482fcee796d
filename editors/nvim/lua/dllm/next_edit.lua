--- Next edits: after a change in Normal or Insert mode (debounced), asks the buffer's dllm
--- client for the edit that follows (`textDocument/copilotInlineEdit`) and previews it with
--- extmarks: the text it replaces highlighted as deleted (DllmNextEditDelete), the new text
--- inline after it (DllmNextEditAdd; the lines past its first as virtual lines) and a sign on
--- the edit's line when that is not the cursor's. While one is shown, buffer-local keys act on
--- it: <Tab> jumps to the edit's line, <Tab> there applies it and runs its command (the server
--- counts the acceptance per kind of suggestion), <Esc> dismisses it and then is itself. The
--- preview goes away on any further change and when the buffer is left.

local M = {}

local api = vim.api
local ns = api.nvim_create_namespace('dllm.next_edit')
local has_011 = vim.fn.has('nvim-0.11') == 1

M.ns = ns
M.config = { debounce_ms = 150, name = 'dllm', keys = { jump = '<Tab>', dismiss = '<Esc>' } }
M.accepted = 0 -- edits applied (and reported), for tests and curiosity

--- Per buffer: { timer, client_id, request_id, edit = { the server's edit }, pos = { row, col,
--- end_row, end_col } (bytes, 0-based), tick, saved = { the mappings the keys shadow } }
local state = {}
local unsupported = {} -- client id → true once it answered MethodNotFound

local function buf_state(buf)
  state[buf] = state[buf] or {}
  return state[buf]
end

--- The byte column of an LSP character offset on line `row` of buf.
local function byte_col(buf, row, character, encoding)
  local line = api.nvim_buf_get_lines(buf, row, row + 1, false)[1]
  if not line then
    return nil
  end
  if encoding == 'utf-8' then
    return math.min(character, #line)
  end
  local ok, col
  if has_011 then
    ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, encoding == 'utf-16')
  end
  return ok and col or #line
end

--- The version of buf the client last sent (its changedtick), as vim.lsp tracks it.
local function version_of(buf)
  local versions = vim.lsp.util.buf_versions
  return versions and versions[buf] or api.nvim_buf_get_changedtick(buf)
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
    local client = vim.lsp.get_client_by_id(s.client_id or -1)
    if client then
      require('dllm').cancel(client, s.request_id)
    end
    s.request_id = nil
  end
end

local function unmap(buf, s)
  if not s.saved then
    return
  end
  for _, saved in ipairs(s.saved) do
    pcall(vim.keymap.del, saved.mode, saved.lhs, { buffer = buf })
    if saved.map and not vim.tbl_isempty(saved.map) then
      pcall(vim.fn.mapset, saved.mode, false, saved.map) -- the buffer's own mapping, back
    end
  end
  s.saved = nil
end

--- Clears the suggestion of buf (0: current): its extmarks, its keys and its pending request.
function M.clear(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local s = buf_state(buf)
  cancel(s)
  s.edit, s.pos = nil, nil
  unmap(buf, s)
  if api.nvim_buf_is_valid(buf) then
    api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  end
end

--- The suggestion shown in buf (0: current): { edit = the server's edit, pos = { row, col,
--- end_row, end_col } }, or nil.
function M.current(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local s = state[buf]
  if s and s.edit then
    return { edit = s.edit, pos = s.pos }
  end
end

function M.visible(buf)
  return M.current(buf) ~= nil
end

local function cursor_row()
  return api.nvim_win_get_cursor(0)[1] - 1
end

local function draw(buf, s)
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local p, text = s.pos, s.edit.text
  if p.row ~= p.end_row or p.col ~= p.end_col then
    api.nvim_buf_set_extmark(buf, ns, p.row, p.col, {
      end_row = p.end_row,
      end_col = p.end_col,
      hl_group = 'DllmNextEditDelete',
      priority = 200,
    })
  end
  local lines = vim.split(text, '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    table.insert(virt_lines, { { lines[i], 'DllmNextEditAdd' } })
  end
  local opts = {
    virt_text = lines[1] ~= '' and { { lines[1], 'DllmNextEditAdd' } } or nil,
    virt_text_pos = vim.fn.has('nvim-0.10') == 1 and 'inline' or 'eol',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    priority = 200,
  }
  if opts.virt_text or opts.virt_lines then
    api.nvim_buf_set_extmark(buf, ns, p.end_row, p.end_col, opts)
  end
  if p.row ~= cursor_row() then
    api.nvim_buf_set_extmark(buf, ns, p.row, 0, {
      sign_text = '»',
      sign_hl_group = 'DllmNextEditSign',
    })
  end
end

--- Runs the edit's command (dllm.nextEditAccepted with its id): the server counts it.
local function report_accepted(client, edit)
  local cmd = edit.command
  if type(cmd) ~= 'table' or type(cmd.command) ~= 'string' then
    return
  end
  local params = { command = cmd.command, arguments = cmd.arguments }
  require('dllm').request(client, 'workspace/executeCommand', params, function(err, result)
    M.last_command = { err = err, result = result } -- for :lua = and tests
  end, 0)
  M.accepted = M.accepted + 1
end

--- Applies the suggestion of the current buffer; false when there is none.
function M.apply()
  local buf = api.nvim_get_current_buf()
  local s = buf_state(buf)
  local edit, client = s.edit, vim.lsp.get_client_by_id(s.client_id or -1)
  if not edit or not client then
    return false
  end
  local p = s.pos
  M.clear(buf)
  local text_edit = { range = edit.range, newText = edit.text }
  vim.lsp.util.apply_text_edits({ text_edit }, buf, client.offset_encoding)
  -- the cursor goes to the end of the new text
  local lines = vim.split(edit.text, '\n', { plain = true })
  local row = p.row + #lines - 1
  local col = (#lines == 1 and p.col or 0) + #lines[#lines]
  pcall(api.nvim_win_set_cursor, 0, { row + 1, col })
  report_accepted(client, edit)
  return true
end

--- <Tab>: to the edit's line when the cursor is elsewhere, else applies the edit.
function M.jump_or_apply()
  local cur = M.current()
  if not cur then
    return false
  end
  if cursor_row() ~= cur.pos.row then
    api.nvim_win_set_cursor(0, { cur.pos.row + 1, cur.pos.col })
    draw(api.nvim_get_current_buf(), buf_state(api.nvim_get_current_buf()))
    return true
  end
  return M.apply()
end

--- <Esc>: dismisses the suggestion (the key then does what it does).
function M.dismiss()
  local buf = api.nvim_get_current_buf()
  local had = M.visible(buf)
  M.clear(buf)
  return had
end

local function map(buf, s)
  unmap(buf, s)
  s.saved = {}
  local keys = M.config.keys or {}
  for _, mode in ipairs({ 'n', 'i' }) do
    for action, lhs in pairs(keys) do
      if lhs then
        local old = vim.fn.maparg(lhs, mode, false, true)
        table.insert(s.saved, {
          mode = mode,
          lhs = lhs,
          map = (type(old) == 'table' and old.buffer == 1) and old or nil,
        })
        local fn = action == 'jump' and M.jump_or_apply
          or function()
            vim.schedule(M.dismiss) -- nothing changes inside an expr mapping
            return lhs -- then the key does what it does
          end
        vim.keymap.set(mode, lhs, fn, {
          buffer = buf,
          expr = action ~= 'jump',
          desc = 'dllm: next edit ' .. action,
        })
      end
    end
  end
end

local function is_position(p)
  return type(p) == 'table' and type(p.line) == 'number' and type(p.character) == 'number'
end

local function show(buf, client, edit)
  local s = buf_state(buf)
  local r = edit.range
  if type(r) ~= 'table' or not is_position(r.start) or not is_position(r['end']) then
    return
  end
  if type(edit.text) ~= 'string' then
    return
  end
  local enc = client.offset_encoding
  local col = byte_col(buf, r.start.line, r.start.character, enc)
  local end_col = byte_col(buf, r['end'].line, r['end'].character, enc)
  if not col or not end_col then
    return -- a range outside the buffer
  end
  s.edit, s.client_id = edit, client.id
  s.pos = { row = r.start.line, col = col, end_row = r['end'].line, end_col = end_col }
  draw(buf, s)
  map(buf, s)
  if type(edit.command) == 'table' then -- Copilot's report of a shown edit, as its clients send it
    local params = { item = { command = edit.command } }
    if has_011 then
      client:notify('textDocument/didShowInlineEdit', params)
    else
      client.notify('textDocument/didShowInlineEdit', params)
    end
  end
end

local function on_result(buf, client, tick, err, result)
  local s = buf_state(buf)
  s.request_id = nil
  M.last = { err = err, result = result } -- the latest answer, for :lua = and tests
  if err then
    if err.code == -32601 then
      unsupported[client.id] = true -- the server has no next edits: ask no more
    end
    return
  end
  if not api.nvim_buf_is_valid(buf) or api.nvim_buf_get_changedtick(buf) ~= tick then
    return
  end
  local edit = type(result) == 'table' and type(result.edits) == 'table' and result.edits[1]
  if type(edit) ~= 'table' then
    return
  end
  local doc = edit.textDocument
  if type(doc) == 'table' and doc.version ~= nil and doc.version ~= version_of(buf) then
    return -- for another version of the text
  end
  if type(doc) == 'table' and doc.uri ~= nil and doc.uri ~= vim.uri_from_bufnr(buf) then
    return -- an edit in another file: not previewed
  end
  if api.nvim_get_current_buf() == buf then
    show(buf, client, edit)
  end
end

--- Asks for the next edit at the cursor of the current buffer now.
function M.request()
  local buf = api.nvim_get_current_buf()
  local client = require('dllm').client(buf)
  if not client or unsupported[client.id] then
    return
  end
  local s = buf_state(buf)
  cancel(s)
  local tick = api.nvim_buf_get_changedtick(buf)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.textDocument.version = version_of(buf)
  -- bufnr: the client sends the buffer's pending didChange first
  local method = 'textDocument/copilotInlineEdit'
  local ok, id = require('dllm').request(client, method, params, function(err, result)
    on_result(buf, client, tick, err, result)
  end, buf)
  if ok then
    s.client_id, s.request_id = client.id, id
  end
end

local function changed(buf)
  M.clear(buf)
  local s = buf_state(buf)
  s.timer = vim.defer_fn(function()
    s.timer = nil
    if api.nvim_get_current_buf() == buf and api.nvim_buf_is_valid(buf) then
      M.request()
    end
  end, M.config.debounce_ms)
end

local function highlights()
  api.nvim_set_hl(0, 'DllmNextEditDelete', { default = true, link = 'DiffDelete' })
  api.nvim_set_hl(0, 'DllmNextEditAdd', { default = true, link = 'DiffAdd' })
  api.nvim_set_hl(0, 'DllmNextEditSign', { default = true, link = 'Special' })
  -- struck through as well, where the colour scheme's DiffDelete only colours
  local del = api.nvim_get_hl(0, { name = 'DiffDelete', link = false })
  if del and not vim.tbl_isempty(del) then
    del.strikethrough = true
    del.default = true
    api.nvim_set_hl(0, 'DllmNextEditDelete', del)
  end
end

local function attach(buf)
  local group = api.nvim_create_augroup('dllm_next_edit_' .. buf, { clear = true })
  api.nvim_create_autocmd({ 'TextChanged', 'TextChangedI' }, {
    group = group,
    buffer = buf,
    callback = function()
      changed(buf)
    end,
  })
  api.nvim_create_autocmd({ 'BufLeave', 'BufUnload' }, {
    group = group,
    buffer = buf,
    callback = function()
      M.clear(buf)
    end,
  })
end

--- cfg: setup's options (debounce_ms, name; keymaps.next_edit and keymaps.next_edit_dismiss).
function M.setup(cfg)
  local keys = cfg.keymaps or {}
  M.config = vim.tbl_extend('force', M.config, {
    debounce_ms = cfg.debounce_ms,
    name = cfg.name,
    keys = { jump = keys.next_edit or false, dismiss = keys.next_edit_dismiss or false },
  })
  highlights()
  local group = api.nvim_create_augroup('dllm_next_edit', { clear = true })
  api.nvim_create_autocmd('ColorScheme', { group = group, callback = highlights })
  api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.config.name then
        attach(ev.buf)
      end
    end,
  })
  api.nvim_create_autocmd('LspDetach', {
    group = group,
    callback = function(ev)
      local client = vim.lsp.get_client_by_id(ev.data.client_id)
      if client and client.name == M.config.name then
        M.clear(ev.buf)
        pcall(api.nvim_del_augroup_by_name, 'dllm_next_edit_' .. ev.buf)
      end
    end,
  })
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if require('dllm').client(buf) then
      attach(buf) -- attached before this setup
    end
  end
end

return M
