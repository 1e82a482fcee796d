--- dllm-infill-ls for Neovim 0.10+: registers the server, shows inline completions (Neovim's own
--- `vim.lsp.inline_completion` on 0.12+, `dllm.ghost` before that) and adds `:Dllm`.
---
--- require('dllm').setup({
---   cmd = { 'dllm-infill-ls' },        -- or vim.lsp.rpc.connect(host, port) for TCP mode
---   filetypes = { 'python' },
---   init_options = { model = 'builtin' },  -- the server's settings (docs/editors.md)
---   keymaps = { accept = '<C-l>' },    -- merged with the defaults; false: none
---   inline = 'auto',                   -- 'auto' | 'native' | 'fallback' | false
--- })

local M = {}

M.defaults = {
  name = 'dllm',
  cmd = { 'dllm-infill-ls' },
  filetypes = { 'python' },
  root_markers = { '.git', 'pyproject.toml', 'setup.py' },
  init_options = {},
  settings = nil,
  inline = 'auto',
  debounce_ms = 150, -- the fallback's own delay in Insert mode, before the server's debounceMs
  keymaps = {
    accept = '<C-l>',
    accept_word = '<M-l>',
    accept_line = '<M-L>',
    next = '<M-]>',
    prev = '<M-[>',
    dismiss = '<C-]>',
  },
}

M.config = vim.deepcopy(M.defaults)

local has_011 = vim.fn.has('nvim-0.11') == 1
local warned = {}

local function warn_once(key, msg)
  if warned[key] then
    return
  end
  warned[key] = true
  vim.notify(msg, vim.log.levels.WARN, { title = 'dllm' })
end

--- The dllm client attached to bufnr (0: current), or nil.
function M.client(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  return get({ name = M.config.name, bufnr = bufnr })[1]
end

--- Client methods are called with `:` from 0.11 on and with `.` on 0.10.
function M.request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

function M.cancel(client, id)
  if has_011 then
    client:cancel_request(id)
  else
    client.cancel_request(id)
  end
end

--- Which ghost text is used: 'native', 'fallback' or nil (none).
function M.inline_mode()
  local want = M.config.inline
  if want == false then
    return nil
  end
  local native = vim.lsp.inline_completion ~= nil
  if want == 'native' and not native then
    return 'fallback'
  end
  if want == 'auto' then
    return native and 'native' or 'fallback'
  end
  return want
end

local function command_missing(cmd)
  if type(cmd) ~= 'table' then
    return nil -- a function (vim.lsp.rpc.connect): nothing to check
  end
  if vim.fn.executable(cmd[1]) == 1 then
    return nil
  end
  return cmd[1]
end

--- Asks the user before an edit that overwrites code (the server marks it with a change
--- annotation that needs confirmation). Replace it to answer differently (tests do).
function M.confirm(question)
  return vim.fn.confirm(question, '&Replace\n&Cancel', 2) == 1
end

--- workspace/applyEdit for this client: Neovim's own handler applies every edit at once and
--- has no confirmation UI for change annotations, so an edit whose annotation needs
--- confirmation is shown (its label, description and new text) and applied only on Replace.
local function apply_edit(_, params, ctx)
  local client = assert(vim.lsp.get_client_by_id(ctx.client_id))
  local edit = params.edit or {}
  for _, note in pairs(edit.changeAnnotations or {}) do
    if note.needsConfirmation then
      local texts = {}
      for _, change in ipairs(edit.documentChanges or {}) do
        for _, e in ipairs(change.edits or {}) do
          table.insert(texts, e.newText)
        end
      end
      local question = ('%s\n%s\n\n%s'):format(
        note.label or 'dllm',
        note.description or '',
        table.concat(texts, '\n')
      )
      M.last_confirm = question
      if not M.confirm(question) then
        return { applied = false, failureReason = 'not confirmed' }
      end
      break
    end
  end
  local ok, err = pcall(vim.lsp.util.apply_workspace_edit, edit, client.offset_encoding)
  return { applied = ok, failureReason = not ok and tostring(err) or nil }
end

local CAPABILITIES = {
  workspace = { workspaceEdit = { documentChanges = true, changeAnnotationSupport = {} } },
}

local function register(cfg)
  local missing = command_missing(cfg.cmd)
  if missing then
    warn_once(
      'cmd',
      ('dllm: the server command %q is not executable, so no completions. Install it with '
        .. "`pip install -e .` in the dllm-infill repository (or `make setup`), or give its path: "
        .. "require('dllm').setup({ cmd = { '/path/to/.venv/bin/dllm-infill-ls' } })"):format(
        missing
      )
    )
    return false
  end
  local server = {
    cmd = cfg.cmd,
    filetypes = cfg.filetypes,
    root_markers = cfg.root_markers,
    init_options = cfg.init_options,
    settings = cfg.settings,
    capabilities = CAPABILITIES,
    handlers = { ['workspace/applyEdit'] = apply_edit },
  }
  if vim.lsp.config and vim.lsp.enable then
    vim.lsp.config(cfg.name, server)
    vim.lsp.enable(cfg.name)
    return true
  end
  -- 0.10: no vim.lsp.config; start per buffer.
  local function start(buf)
    local root = vim.fs.root and vim.fs.root(buf, cfg.root_markers) or vim.fn.getcwd()
    vim.lsp.start({
      name = cfg.name,
      cmd = cfg.cmd,
      root_dir = root,
      init_options = cfg.init_options,
      settings = cfg.settings,
      capabilities = CAPABILITIES,
      handlers = { ['workspace/applyEdit'] = apply_edit },
    }, { bufnr = buf })
  end
  vim.api.nvim_create_autocmd('FileType', {
    group = vim.api.nvim_create_augroup('dllm_start', { clear = true }),
    pattern = cfg.filetypes,
    callback = function(ev)
      start(ev.buf)
    end,
  })
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local ft = vim.bo[buf].filetype
    if vim.api.nvim_buf_is_loaded(buf) and vim.tbl_contains(cfg.filetypes, ft) then
      start(buf)
    end
  end
  return true
end

-- Keymaps: each is an expr mapping that types its own key when there is nothing to act on.
local function map_native(keys)
  local ic = vim.lsp.inline_completion
  local function accept_part(kind)
    return function()
      local ok = ic.get({
        on_accept = function(item)
          require('dllm.ghost').apply_native(item, kind)
        end,
      })
      return not ok
    end
  end
  return {
    accept = function()
      return not ic.get()
    end,
    accept_word = accept_part('word'),
    accept_line = accept_part('line'),
    next = function()
      vim.schedule(function()
        ic.select({ count = 1 })
      end)
    end,
    prev = function()
      vim.schedule(function()
        ic.select({ count = -1 })
      end)
    end,
  }
end

local function map_fallback()
  local ghost = require('dllm.ghost')
  local function act(fn)
    return function()
      if not ghost.visible() then
        return true
      end
      vim.schedule(fn) -- the buffer cannot change inside an expr mapping
      return false
    end
  end
  return {
    accept = act(function()
      ghost.accept('all')
    end),
    accept_word = act(function()
      ghost.accept('word')
    end),
    accept_line = act(function()
      ghost.accept('line')
    end),
    next = function()
      vim.schedule(function()
        ghost.cycle(1)
      end)
    end,
    prev = function()
      vim.schedule(function()
        ghost.cycle(-1)
      end)
    end,
    dismiss = act(function()
      ghost.clear()
    end),
  }
end

local function set_keymaps(mode, keys)
  if not keys then
    return
  end
  local actions = mode == 'native' and map_native(keys) or map_fallback()
  for action, lhs in pairs(keys) do
    local fn = actions[action]
    if lhs and fn then
      vim.keymap.set('i', lhs, function()
        local passthrough = fn()
        if passthrough == true then
          return vim.keycode and vim.keycode(lhs)
            or vim.api.nvim_replace_termcodes(lhs, true, true, true)
        end
        return ''
      end, { expr = true, replace_keycodes = false, desc = 'dllm: ' .. action })
    end
  end
end

-- :Dllm ---------------------------------------------------------------------------------------

local function attached()
  local client = M.client(0)
  if not client then
    vim.notify(
      'dllm: dllm-infill-ls is not attached to this buffer (filetypes: '
        .. table.concat(M.config.filetypes, ', ')
        .. ')',
      vim.log.levels.WARN
    )
  end
  return client
end

local function exec(client, command, arguments)
  local cmd = { title = command, command = command, arguments = arguments }
  local function done(err, result)
    -- A refusal ("no function at the cursor") was shown by the server with window/showMessage.
    M.last_command = { command = command, err = err, result = result }
    if err then
      local msg = err.message or vim.inspect(err)
      vim.notify('dllm: ' .. command .. ': ' .. msg, vim.log.levels.ERROR)
    end
  end
  if client.exec_cmd then
    client:exec_cmd(cmd, { bufnr = 0 }, done)
  else
    M.request(client, 'workspace/executeCommand', cmd, done, 0)
  end
end

--- uri and LSP range of the command's lines (whole lines; the current one without a range).
local function selection_range(client, opts)
  local first, last = opts.line1, opts.line2
  if opts.range == 0 then
    first, last = vim.fn.line('.'), vim.fn.line('.')
  end
  local stop = { line = last, character = 0 } -- the start of the line after the selection
  if last >= vim.api.nvim_buf_line_count(0) then
    local text = vim.api.nvim_buf_get_lines(0, last - 1, last, true)[1]
    local col = vim.lsp.util.character_offset(0, last - 1, #text, client.offset_encoding)
    stop = { line = last - 1, character = col }
  end
  local uri = vim.uri_from_bufnr(vim.api.nvim_get_current_buf())
  return uri, { start = { line = first - 1, character = 0 }, ['end'] = stop }
end

--- One line from a dllm/status result: `dllm: ready · builtin on cpu · 12 requests · τ 0.5 ·
--- 3 shown · 1 accepted (33%) · 0 partial · p50 420 ms` (then `slow: ...` or `failing: ...`).
function M.format_status(s)
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
function M.status(on_line)
  local client = attached()
  if not client then
    return
  end
  M.request(client, 'dllm/status', {}, function(err, result)
    if err then
      on_line('dllm: status failed: ' .. (err.message or vim.inspect(err)))
    else
      on_line(M.format_status(result or {}))
    end
  end, 0)
end

local subcommands = {
  fill = function()
    local client = attached()
    if client then
      local p = vim.lsp.util.make_position_params(0, client.offset_encoding)
      exec(client, 'dllm.fillFunctionBody', { p.textDocument.uri, p.position })
    end
  end,
  regenerate = function(opts, rest)
    local client = attached()
    if client then
      local uri, range = selection_range(client, opts)
      local args = { uri, range }
      if rest ~= '' then
        table.insert(args, rest)
      end
      exec(client, 'dllm.refactorSelection', args)
    end
  end,
  refine = function(opts)
    local client = attached()
    if client then
      local uri, range = selection_range(client, opts)
      exec(client, 'dllm.refineSelection', { uri, range })
    end
  end,
  snooze = function(_, rest)
    -- :Dllm snooze [minutes]: no automatic suggestions for that long (15 by default; 0 wakes
    -- them up). The server keeps the state, so every editor attached to it is snoozed alike.
    local client = attached()
    local minutes = rest == '' and 15 or tonumber(rest)
    if not minutes then
      vim.notify('dllm: usage: :Dllm snooze [minutes]', vim.log.levels.WARN)
    elseif client then
      exec(client, 'dllm.snooze', { minutes })
    end
  end,
  status = function()
    M.status(function(line)
      vim.notify(line, vim.log.levels.INFO)
    end)
  end,
}

local function dllm_command(opts)
  local sub, rest = opts.args:match('^%s*(%S*)%s*(.-)%s*$')
  local fn = subcommands[sub]
  if not fn then
    local usage =
      'dllm: usage: :Dllm fill | regenerate [instruction] | refine | snooze [minutes] | status'
    vim.notify(usage, vim.log.levels.WARN)
    return
  end
  fn(opts, rest)
end

function M.setup(opts)
  opts = opts or {}
  local cfg = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  if opts.keymaps == false then
    cfg.keymaps = false
  end
  M.config = cfg

  vim.api.nvim_create_user_command('Dllm', dllm_command, {
    nargs = '*',
    range = true,
    desc = 'dllm-infill-ls: fill | regenerate [instruction] | refine | snooze [minutes] | status',
    complete = function(lead, line)
      if line:match('^%S*%s+%S+%s') then
        return {}
      end
      return vim.tbl_filter(function(s)
        return s:find(lead, 1, true) == 1
      end, { 'fill', 'regenerate', 'refine', 'snooze', 'status' })
    end,
  })

  local function ghost_hl()
    -- Gray and italic in 256 and 16 colours alike; not NonText, which many schemes hide.
    local hl = { default = true, fg = '#808080', ctermfg = 8, italic = true }
    vim.api.nvim_set_hl(0, 'DllmGhost', hl)
  end
  ghost_hl()
  vim.api.nvim_create_autocmd('ColorScheme', {
    group = vim.api.nvim_create_augroup('dllm_hl', { clear = true }),
    callback = ghost_hl,
  })
  if not register(cfg) then
    return
  end

  local mode = M.inline_mode()
  if mode == 'native' then
    vim.lsp.inline_completion.enable(true)
  elseif mode == 'fallback' then
    require('dllm.ghost').setup(cfg)
  end
  if mode then
    set_keymaps(mode, cfg.keymaps)
  end
end

return M
