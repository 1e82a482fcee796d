-- Drives copilot-lsp (copilotlsp-nvim/copilot-lsp, vendored unmodified under vendor/copilot-lsp),
-- a client of Copilot's next edit suggestions, against dllm-infill-ls in a real headless Neovim;
-- test_copilot_lsp.py runs it as
--   nvim --clean --headless --cmd 'set rtp^=vendor/copilot-lsp' \
--     -c 'luafile drive_copilot_lsp.lua' area.py
-- Only configuration, as its README has a user write it: the `copilot_ls` server's command is
-- dllm-infill-ls, and <Tab> walks to the suggestion or applies it. Environment: DLLM_LS (server
-- command), DLLM_RESULT (JSON lines are appended there; the last is {"step": "done"}).

local api = vim.api
local here = debug.getinfo(1, 'S').source:sub(2):match('(.*/)') or './'
local h = dofile(here .. 'harness.lua')
local emit, sleep, lines = h.emit, h.sleep, h.lines

--- copilot-lsp's preview: the text it marks deleted and its virtual lines, from its extmarks.
local function preview()
  local ns = api.nvim_get_namespaces()['copilotlsp.nes']
  if not ns or not vim.b.nes_state then
    return nil
  end
  local p = { virt_lines = {} }
  for _, m in ipairs(api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })) do
    local row, col, d = m[2], m[3], m[4]
    if d.hl_group == 'CopilotLspNesDelete' then
      p.deleted = table.concat(api.nvim_buf_get_text(0, row, col, d.end_row, d.end_col, {}), '\n')
      p.deleted_row = row
    end
    for _, vl in ipairs(d.virt_lines or {}) do
      table.insert(p.virt_lines, h.chunks(vl))
    end
    if d.virt_text then
      p.virt_text = h.chunks(d.virt_text)
    end
  end
  return (p.deleted or p.virt_text or #p.virt_lines > 0) and p or nil
end

--- The configuration, as a user's init.lua would hold it (here run once Neovim has started, as a
--- plugin manager would): copilot-lsp's own `lsp/copilot_ls.lua`, our server as its command.
local function configure()
  vim.g.copilot_nes_debounce = 150
  vim.lsp.config('copilot_ls', {
    cmd = { assert(os.getenv('DLLM_LS')) },
    init_options = { model = 'builtin', device = 'cpu' },
    -- copilot-lsp sends and applies positions in UTF-16 whatever was negotiated: offer only that
    capabilities = { general = { positionEncodings = { 'utf-16' } } },
  })
  vim.lsp.enable('copilot_ls')
  -- <Tab> as copilot-lsp's README maps it
  vim.keymap.set('n', '<Tab>', function()
    if vim.b[api.nvim_get_current_buf()].nes_state then
      local nes = require('copilot-lsp.nes')
      local _ = nes.walk_cursor_start_edit()
        or (nes.apply_pending_nes() and nes.walk_cursor_end_edit())
      return nil
    end
    return '<C-i>'
  end, { desc = 'Accept Copilot NES suggestion', expr = true })
end

local function run()
  configure()
  local client, status = h.start(h.lsp_client('copilot_ls'), 240)
  if not client then
    return
  end

  -- The rename, as a person makes it: copilot-lsp asks on TextChanged.
  h.rename_w()
  -- Its preview; <Tab>: the cursor walks to the edit; <Tab> again applies it.
  local applied = h.preview_jump_apply(preview, function()
    return vim.b.nes_state
  end)
  if applied == nil then
    return
  end
  sleep(300)
  emit({
    step = 'apply',
    ok = applied,
    lines = lines(),
    cursor = api.nvim_win_get_cursor(0),
    cleared = vim.b.nes_state == nil or preview() == nil,
  })
  local s = status()
  emit({ step = 'status', ok = s ~= nil, encoding = s and s.encoding, stats = s and s.stats })
end

h.watchdog(300)

h.run(run)
