-- Drives sidekick.nvim's next edit suggestions (its files for them, vendored unmodified under
-- vendor/sidekick.nvim) against dllm-infill-ls in a real headless Neovim; test_sidekick.py runs
-- it as
--   nvim --clean --headless --cmd 'set rtp^=vendor/sidekick.nvim' \
--     -c 'luafile drive_sidekick.lua' area.py
-- Only configuration: a server whose name has `copilot` in it (what sidekick looks for) runs
-- dllm-infill-ls, sidekick's next edits are enabled (`require('sidekick.nes').enable()`, its
-- `:Sidekick nes enable`) and <Tab> is `require('sidekick').nes_jump_or_apply()`, as its README
-- maps it. Environment: DLLM_LS (server command), DLLM_RESULT (JSON lines are appended there; the
-- last is {"step": "done"}).

local api = vim.api
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local h = dofile(here .. 'harness.lua')
local emit, wait_for, lines = h.emit, h.wait_for, h.lines

--- The configuration, as a user's init.lua would hold it (run once Neovim has started, as a
--- plugin manager would).
local function configure()
  vim.lsp.config('copilot', {
    cmd = { assert(os.getenv('DLLM_LS')) },
    filetypes = { 'python' },
    init_options = { model = 'builtin', device = 'cpu' },
  })
  vim.lsp.enable('copilot')
  require('sidekick.nes').enable()
  vim.keymap.set('n', '<Tab>', function()
    if not require('sidekick').nes_jump_or_apply() then
      return '<Tab>'
    end
  end, { expr = true, desc = 'Goto/Apply Next Edit Suggestion' })
end

--- sidekick's preview, from its extmarks: its sign's row and the text of its virtual text.
local function preview()
  local ns = require('sidekick.config').ns
  local p, texts = nil, {}
  for _, m in ipairs(api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
    local row, d = m[2], m[4]
    p = p or {}
    if d.sign_text then
      p.sign_row = row
    end
    table.insert(texts, h.chunks(d.virt_text or {}))
    for _, vl in ipairs(d.virt_lines or {}) do
      table.insert(texts, h.chunks(vl))
    end
  end
  if p then
    p.text = table.concat(texts)
  end
  return p
end

local function run()
  configure()
  local client, status = h.start(h.lsp_client('copilot'), 240)
  if not client then
    return
  end

  -- The rename, as a person makes it: sidekick asks on leaving Insert mode and on TextChanged.
  h.rename_w()
  -- Its preview; <Tab>: the cursor jumps to the edit; <Tab> again applies it and runs its
  -- command.
  local applied = h.preview_jump_apply(function()
    return require('sidekick.nes').have() and preview()
  end, function()
    return require('sidekick.nes').get(api.nvim_get_current_buf())[1]
  end)
  if applied == nil then
    return
  end
  local cursor = api.nvim_win_get_cursor(0)
  emit({ step = 'apply', ok = applied, lines = lines(), cursor = cursor })
  local counted = wait_for(10, function()
    local s = status()
    local kinds = s and s.next_edits and s.next_edits.kinds or {}
    return kinds.rename and kinds.rename.accepted == 1 and s
  end) or status()
  emit({ step = 'status', ok = counted ~= nil, next_edits = counted and counted.next_edits })
end

h.watchdog(300)

h.run(run)
