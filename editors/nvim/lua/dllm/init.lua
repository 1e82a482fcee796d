--- dllm-infill-ls for Neovim 0.10+: registers the server, shows inline completions (Neovim's own
--- `vim.lsp.inline_completion` on 0.12+, `dllm.ghost` before that) and adds `:Dllm`.
---
--- require('dllm').setup({
---   cmd = { 'dllm-infill-ls' },        -- or vim.lsp.rpc.connect(host, port) for TCP mode
---   filetypes = { 'python', 'go', ... },  -- the grammars' languages by default
---   init_options = { model = 'builtin' },  -- the server's settings (docs/editors.md)
---   keymaps = { accept = '<C-l>' },    -- merged with the defaults; false: none
---   inline = 'auto',                   -- 'auto' | 'native' | 'fallback' | false
---   next_edits = true,                 -- the edit that follows a change (nextEdits.enabled)
--- })
---
--- This module holds the configuration and wires the others: `dllm.server` (registration, the
--- confirming applyEdit handler), `dllm.keymaps`, `dllm.commands` (`:Dllm`), `dllm.status`,
--- `dllm.client` (the buffer's client and version-safe calls), `dllm.ghost` (the fallback ghost
--- text), `dllm.next_edit` (next edits, previewed with extmarks) and `dllm.stats` (reports of
--- shown and accepted items).

local client = require('dllm.client')
local status = require('dllm.status')

local M = {}

M.defaults = {
  name = 'dllm',
  cmd = { 'dllm-infill-ls' },
  -- the languages of the grammars; the server completes in any (its `languages`, "*")
  filetypes = {
    'python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact',
    'go', 'rust', 'java', 'c', 'cpp',
  },
  root_markers = { '.git', 'pyproject.toml', 'setup.py', 'go.mod', 'Cargo.toml', 'package.json' },
  init_options = {},
  settings = nil,
  inline = 'auto',
  next_edits = true, -- asks for the edit that follows a change; forwarded as nextEdits.enabled
  debounce_ms = 150, -- the fallback's own delay in Insert mode, before the server's debounceMs
  keymaps = {
    accept = '<C-l>',
    accept_word = '<M-l>',
    accept_line = '<M-L>',
    next = '<M-]>',
    prev = '<M-[>',
    dismiss = '<C-]>',
    next_edit = '<Tab>', -- Normal and Insert mode, only while a next edit is shown
    next_edit_dismiss = '<Esc>',
  },
}

M.config = vim.deepcopy(M.defaults)

M.client = client.client -- the dllm client attached to bufnr (0: current), or nil
M.request = client.request -- client:request on 0.11+, client.request on 0.10
M.cancel = client.cancel
M.format_status = status.format -- one line from a dllm/status result
M.status = status.request -- calls on_line(line) with the current buffer's status line

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

--- Asks the user before an edit that overwrites code (the server marks it with a change
--- annotation that needs confirmation). Replace it to answer differently (tests do).
function M.confirm(question)
  return vim.fn.confirm(question, '&Replace\n&Cancel', 2) == 1
end

local function ghost_hl()
  -- Gray and italic in 256 and 16 colours alike; not NonText, which many schemes hide.
  local hl = { default = true, fg = '#808080', ctermfg = 8, italic = true }
  vim.api.nvim_set_hl(0, 'DllmGhost', hl)
end

function M.setup(opts)
  opts = opts or {}
  local cfg = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  if opts.keymaps == false then
    cfg.keymaps = false
  end
  -- the server hears whether to suggest next edits (a setting given there wins)
  local init = vim.deepcopy(cfg.init_options or {})
  local enabled = { enabled = cfg.next_edits ~= false }
  init.nextEdits = vim.tbl_extend('keep', init.nextEdits or {}, enabled)
  cfg.init_options = init
  M.config = cfg

  require('dllm.commands').create()
  ghost_hl()
  vim.api.nvim_create_autocmd('ColorScheme', {
    group = vim.api.nvim_create_augroup('dllm_hl', { clear = true }),
    callback = ghost_hl,
  })
  if not require('dllm.server').register(cfg) then
    return
  end

  local mode = M.inline_mode()
  if mode == 'native' then
    vim.lsp.inline_completion.enable(true)
  elseif mode == 'fallback' then
    require('dllm.ghost').setup(cfg)
  end
  if mode then
    require('dllm.keymaps').set(mode, cfg.keymaps)
  end
  if cfg.next_edits ~= false then
    require('dllm.next_edit').setup(cfg)
  end
end

return M
