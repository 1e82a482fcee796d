--- `:Dllm fill | regenerate [instruction] | refine | snooze [minutes] | status`: each runs one of
--- the server's commands (`workspace/executeCommand`) on the current buffer's dllm client, or
--- shows its status. The result of the last command is kept in `require('dllm').last_command`.

local M = {}

local USAGE = 'fill | regenerate [instruction] | refine | snooze [minutes] | status'

local function exec(client, command, arguments)
  local cmd = { title = command, command = command, arguments = arguments }
  local function done(err, result)
    -- A refusal ("no function at the cursor") was shown by the server with window/showMessage.
    require('dllm').last_command = { command = command, err = err, result = result }
    if err then
      local msg = err.message or vim.inspect(err)
      vim.notify('dllm: ' .. command .. ': ' .. msg, vim.log.levels.ERROR)
    end
  end
  if client.exec_cmd then
    client:exec_cmd(cmd, { bufnr = 0 }, done)
  else
    require('dllm').request(client, 'workspace/executeCommand', cmd, done, 0)
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

local function attached()
  return require('dllm.client').attached()
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
    require('dllm').status(function(line)
      vim.notify(line, vim.log.levels.INFO)
    end)
  end,
}

local function dllm_command(opts)
  local sub, rest = opts.args:match('^%s*(%S*)%s*(.-)%s*$')
  local fn = subcommands[sub]
  if not fn then
    vim.notify('dllm: usage: :Dllm ' .. USAGE, vim.log.levels.WARN)
    return
  end
  fn(opts, rest)
end

--- Creates :Dllm, with completion of its subcommands.
function M.create()
  vim.api.nvim_create_user_command('Dllm', dllm_command, {
    nargs = '*',
    range = true,
    desc = 'dllm-infill-ls: ' .. USAGE,
    complete = function(lead, line)
      if line:match('^%S*%s+%S+%s') then
        return {}
      end
      return vim.tbl_filter(function(s)
        return s:find(lead, 1, true) == 1
      end, { 'fill', 'regenerate', 'refine', 'snooze', 'status' })
    end,
  })
end

return M
