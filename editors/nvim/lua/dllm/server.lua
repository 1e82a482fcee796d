--- Registers dllm-infill-ls with Neovim: `vim.lsp.config` and `vim.lsp.enable` on 0.11+,
--- `vim.lsp.start` per buffer on `FileType` on 0.10; a command that is not executable is one
--- warning and nothing registered. Also the client's `workspace/applyEdit` handler, which asks
--- (`require('dllm').confirm`) before an edit whose change annotation needs confirmation.

local M = {}

local warned = {}

local function warn_once(key, msg)
  if warned[key] then
    return
  end
  warned[key] = true
  vim.notify(msg, vim.log.levels.WARN, { title = 'dllm' })
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

--- workspace/applyEdit for this client: Neovim's own handler applies every edit at once and
--- has no confirmation UI for change annotations, so an edit whose annotation needs
--- confirmation is shown (its label, description and new text) and applied only on Replace.
local function apply_edit(_, params, ctx)
  local dllm = require('dllm')
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
      dllm.last_confirm = question
      if not dllm.confirm(question) then
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

--- Registers the server of cfg (setup's options); false, after one warning, when its command
--- is not executable.
function M.register(cfg)
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

return M
